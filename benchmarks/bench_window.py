"""The window's evaluation time versus the CLI's compute time for the same request.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_window.py [--quick] [--pairs 5]

Window run: from ``session.evaluate()`` to the finished result (every interval; not a partial one) delivered in
the GUI thread (the session's ``evaluation_changed``, after the main window has drawn it), in a real event loop
with the real MainWindow shown. The process is set up as ``python -m calibview.gui.app`` sets it up
(``app.configure_openmp`` before torch loads, then ``heap.tune_allocator``). The window's engine cache is emptied
before each run, so every window run computes from scratch like the CLI's fresh process (the first partial
result's time and the GUI thread's CPU time are printed too). The window's runs are not its process's first
evaluation and the CLI's are: on this project's 2-core machines a process's later evaluations of the demo scored
about 0.3 s slower than its first, in a plain Python process too (no Qt), so part of the ratio is that.
CLI run: a fresh ``python`` process that starts as ``calibview metrics`` starts (``startup.configure_openmp``
before torch loads: GOMP_SPINCOUNT=3000 unless the environment sets a policy; ``heap.tune_allocator``), runs
the same request through ``calibview.core.evaluation.engine.evaluate`` (a fresh Engine) in its main thread, with
this script's original environment, and prints ``evaluation.elapsed_s`` (its compute time; the interpreter start
and imports are not counted). The last line is ``RESULT {json}`` for scripts (bench_engine.py).
Runs are interleaved (window, CLI, window, ...) so that load on a shared machine hits both sides alike; the
medians and their ratio (target: window / CLI <= 1.2) are printed.

The window side goes only through Session (``evaluate`` and its signals), the CLI side only through ``evaluate``,
so a caching engine behind either keeps this script valid (give it requests that do not hit a cache).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")
QUICK = ("none", "ts")

_CHILD = """
import ast, json, os, sys
from calibview.startup import configure_openmp
configure_openmp()                      # as calibview.cli.program.main does, before torch loads
from calibview.core.io.heap import tune_allocator
tune_allocator()                        # and the allocator settings it starts with
omp = lambda: " ".join(f"{k}={os.environ.get(k)}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ)
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
ev = evaluate(EvalRequest(**ast.literal_eval(sys.stdin.read())))
print(json.dumps({"elapsed_s": ev.elapsed_s, "timings": dict(ev.timings),
                  "omp_wait_policy": omp()}))
"""


def _omp() -> str:
    """The OpenMP settings of this process's environment, as calibview.startup.configure_openmp left them."""
    return " ".join(f"{k}={os.environ.get(k)}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ)


def cli_run(request, env: dict) -> dict:
    """The request's compute time in a fresh process (main thread), as ``calibview metrics`` runs it."""
    fields = repr(dataclasses.asdict(request))
    ast.literal_eval(fields)                          # the request must survive the trip as a literal
    env = dict(env, PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    out = subprocess.run([sys.executable, "-c", _CHILD], input=fields, capture_output=True, text=True, env=env,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


class WindowSide:
    """The real MainWindow, shown, with the file open; ``run()`` times one evaluation through the Session."""

    def __init__(self, file: str, run: str, calibrators, n_boot: int) -> None:
        from PySide6 import QtCore, QtWidgets

        from calibview.gui.main_window import MainWindow

        self.QtCore = QtCore
        self.app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0]])
        self.tmp = tempfile.TemporaryDirectory()
        settings = QtCore.QSettings(os.path.join(self.tmp.name, "settings.ini"), QtCore.QSettings.IniFormat)
        self.window = MainWindow(settings=settings)
        self.window.resize(1400, 900)
        self.window.show()
        self.session = self.window.session
        self._wait(lambda: self.window.open_files([file]))           # the window's own first evaluation
        path = str(Path(file).resolve())
        self.session.select_run(path, run, evaluate=False)
        self.session.set_calibrators(calibrators)
        self.session.n_boot = n_boot
        self.request = self.session.build_request()

    def _wait(self, start) -> tuple[float, object]:
        """Run ``start`` inside a real event loop; return (seconds until the evaluation reached the GUI thread,
        the evaluation)."""
        loop = self.QtCore.QEventLoop()
        got: dict = {}

        def on_changed(ev) -> None:
            if ev is not None and getattr(ev, "pending", False):
                got.setdefault("t_partial", time.perf_counter())        # intervals pending: not done yet
            elif ev is not None:
                got["t1"], got["ev"] = time.perf_counter(), ev
                loop.quit()

        def on_error(title: str, message: str) -> None:
            got["error"] = f"{title}: {message}"
            loop.quit()

        def begin() -> None:
            got["t0"] = time.perf_counter()
            start()

        self.session.evaluation_changed.connect(on_changed)       # after MainWindow's: timed once it has drawn
        self.session.error_occurred.connect(on_error)
        self.QtCore.QTimer.singleShot(0, begin)
        try:
            loop.exec()
        finally:
            self.session.evaluation_changed.disconnect(on_changed)
            self.session.error_occurred.disconnect(on_error)
        if "error" in got:
            raise RuntimeError(got["error"])
        self.last_partial_s = got["t_partial"] - got["t0"] if "t_partial" in got else float("nan")
        return got["t1"] - got["t0"], got["ev"]

    def run(self) -> tuple[float, object]:
        """One cold evaluation: the engine's cache is emptied first (between runs, no request in flight)."""
        self.session._worker.engine.cache.clear()
        return self._wait(self.session.evaluate)

    def close(self) -> None:
        self.window.close()
        self.tmp.cleanup()


def gui_thread_cpu_s() -> float:
    """CPU seconds the GUI (main) thread has used so far (Linux: its /proc task stat; NaN elsewhere). What the
    window draws while the worker computes takes this time from the same cores, so it is printed per run."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _stages(timings) -> str:
    fit = sum(v for k, v in timings.items() if k.startswith("fit:"))
    return (f"fit {fit:5.2f}  score {timings.get('score', 0):5.2f}  "
            f"bootstrap {timings.get('bootstrap', 0):6.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--file", default=None, help="HDF5 logits file (default: the bundled demo)")
    p.add_argument("--run", default="resnet110-brier/cifar100")
    p.add_argument("--calibrators", default=None, help=f"comma-separated (default {','.join(FULL)})")
    p.add_argument("--n-boot", type=int, default=None, help="bootstrap resamples (default 1000)")
    p.add_argument("--pairs", type=int, default=None, help="interleaved window/CLI pairs (default 5)")
    p.add_argument("--quick", action="store_true", help="none,ts; 100 resamples; 2 pairs (under a minute)")
    p.add_argument("--no-app-setup", action="store_true",
                   help="skip app.configure_openmp (the window as it ran before OpenMP's idle spin was cut)")
    args = p.parse_args(argv)
    calibrators = tuple(args.calibrators.split(",")) if args.calibrators else (QUICK if args.quick else FULL)
    n_boot = args.n_boot if args.n_boot is not None else (100 if args.quick else 1000)
    pairs = args.pairs or (2 if args.quick else 5)

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))                  # this checkout's calibview, also when run as a script
    cli_env = dict(os.environ)                         # the CLI as a user runs it, before the app's set-up
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from calibview.gui import app
    if args.file is None:
        import calibview
        args.file = str(calibview.demo_path())
    if not args.no_app_setup and not app.configure_openmp():
        print("note: torch was imported before the window's set-up; the window side is not as the app runs")
    if not args.no_app_setup:
        from calibview.core.io.heap import tune_allocator
        tune_allocator()                               # as the window's main() does
    import torch

    window = WindowSide(args.file, args.run, calibrators, n_boot)
    req = window.request
    print(f"{req.run}: {', '.join(req.calibrators)}; fit {req.fit_split}, eval {req.eval_split}; "
          f"n_boot {req.n_boot}; bandwidth {req.bandwidth:g} {req.kernel}; device {req.device}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"Qt platform {window.app.platformName()}, window OpenMP {_omp()}")
    win_s, cli_s, partial_s, gui_s, cli_policy = [], [], [], [], set()
    try:
        for i in range(pairs):
            cpu0 = gui_thread_cpu_s()
            t, ev = window.run()
            gui_s.append(gui_thread_cpu_s() - cpu0)
            win_s.append(t)
            partial_s.append(window.last_partial_s)
            print(f"pair {i + 1}  window {t:6.2f} s (core {ev.elapsed_s:6.2f}, first partial "
                  f"{window.last_partial_s:5.2f}, GUI thread CPU {gui_s[-1]:4.2f})  {_stages(ev.timings)}",
                  flush=True)
            out = cli_run(req, cli_env)
            cli_s.append(out["elapsed_s"])
            cli_policy.add(out.get("omp_wait_policy"))
            print(f"        CLI    {out['elapsed_s']:6.2f} s                 {_stages(out['timings'])}  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        window.close()
    w, c = statistics.median(win_s), statistics.median(cli_s)
    print(f"median window {w:.2f} s, median CLI compute {c:.2f} s, window / CLI = {w / c:.2f} (target <= 1.2); "
          f"CLI OpenMP {','.join(sorted(map(str, cli_policy)))}")
    print("RESULT " + json.dumps({"window_s": win_s, "cli_s": cli_s, "first_partial_s": partial_s,
                                  "gui_thread_cpu_s": gui_s,
                                  "median_window_s": w, "median_cli_s": c, "ratio": w / c,
                                  "calibrators": list(req.calibrators), "n_boot": req.n_boot,
                                  "run": req.run, "pairs": pairs, "window_omp": _omp(),
                                  "cli_omp": sorted(map(str, cli_policy))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
