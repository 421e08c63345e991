"""The caching engine's interactive targets, measured and written into RESULTS.md by this script.

    python benchmarks/bench_engine.py [--quick] [--out benchmarks/RESULTS.md] [--repeats 5] [--pairs 5]
                                      [--skip-large] [--skip-window]

Writes its section of ``--out`` between the markers ``<!-- bench_engine -->`` and ``<!-- /bench_engine -->``
(replacing the previous section; appended when the file has no markers; the file is created if missing). Every
number in the section is measured by this run, and every yes/no is computed from it against the target printed
beside it:

a. bandwidth change after a seven-calibrator evaluation (none,ts,ts-grid,vs,hb,ir,mrr; 1000 resamples) of the
   CIFAR-100 demo run, same Engine: time to the first partial result (``on_partial``) and to the return
   (every interval), and the counters. Each repeat uses a fresh Engine that has evaluated one bandwidth (0.05 on
   odd repeats, 0.0625 on even ones) and times the change to the other, so every repeat is a real change.
b. re-showing an evaluated run: evaluate run A, run B, then alternately A and B again, timing each re-show.
c. adding one calibrator (``ir``) to an evaluated six-calibrator set; time and counters (the same fresh engines as
   a: the seven-calibrator evaluation of a is this one).
d. an ablation through the CLI (18 settings) against the same command with one setting: wall time of the whole
   ``python -m calibview.cli.program metrics`` subprocess, interleaved pairs (the order inside a pair alternates).
e. 10,000 x 21,843 float16 val + test (synthetic, written to a temporary HDF5 file by ``synthetic.write``),
   none,ts,vs with 1000-resample intervals, through ``calibview.cli.program.main`` in a fresh process: wall time of that
   process, and its peak resident memory (VmHWM) above its VmHWM after importing calibview, torch and the engine
   in the same process (not ru_maxrss: a child process's ru_maxrss starts at its parent's peak).
f. the window against the CLI: ``bench_window.py`` as a subprocess (its medians of interleaved pairs, both sides
   cold, both with OpenMP's idle spin set the way their programs set it, calibview.startup.configure_openmp).
g. the headline command, ``calibview metrics FILE --json --fit-split val --eval-split test --calibrators none,ts``
   on 2 x 50,000 x 1,000 float32 logits (synthetic): whole-process wall time, median of 3 (target under 5 s).

``--quick`` (for tests/test_benchmarks.py): the CIFAR-10 demo run, none,ts,hb,ir, 50 resamples, one repeat, one pair,
no 21,843-class run and no headline command; under a minute. Its yes/no are printed but the sizes are not the targets' sizes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]           # this checkout's calibview, not an installed one

from calibview.startup import configure_openmp  # noqa: E402

configure_openmp()                               # as `calibview metrics` starts, before torch loads

import calibview  # noqa: E402
import torch  # noqa: E402

from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402

BEGIN, END = "<!-- bench_engine -->", "<!-- /bench_engine -->"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sections.py beside this script
from sections import cpu_name, write_section  # noqa: E402
DEMO = str(calibview.demo_path())
SEVEN = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")
MB = 1 << 20

_DRIVER = r"""
import json, os, resource, sys, time
t_start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from calibview.startup import configure_openmp
configure_openmp()
import calibview, calibview.cli.program, calibview.core.evaluation.engine, calibview.core.reports.tables, torch
def status(key):
    with open("/proc/self/status") as f:
        return [int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":")][0]
base_hwm, base_rss = status("VmHWM"), status("VmRSS")
base_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t = time.perf_counter()
rc = calibview.cli.program.main(sys.argv[2:])
main_s = time.perf_counter() - t
sys.stdout.flush()
print("DRIVER " + json.dumps({"rc": rc, "main_s": main_s, "import_s": t - t_start, "base_hwm": base_hwm,
                              "base_rss": base_rss, "file": calibview.__file__, "peak_hwm": status("VmHWM"),
                              "base_maxrss": base_maxrss,
                              "peak_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def median(xs) -> float:
    return statistics.median(xs)


def fmt_s(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def fmt_list(xs) -> str:
    return ", ".join(f"{x:.3f}" for x in xs)


def counters_text(c) -> str:
    return (f"fitted {len(c.fitted)} ({','.join(c.fitted) or '-'}), reused {len(c.reused)}, "
            f"scored {len(c.scored)} ({','.join(n for n, _ in c.scored) or '-'}), resampled {len(c.resampled)}")


class Rows:
    """The table: one row per measurement, each with its target and a computed yes/no."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, item: str, what: str, measured: str, target: str, holds, detail: str = "", short: str = ""
            ) -> None:
        row = {"item": item, "what": what, "measured": measured, "target": target,
               "holds": None if holds is None else bool(holds), "detail": detail, "short": short or what}
        self.rows.append(row)
        yn = "n/a" if holds is None else ("yes" if holds else "NO")
        print(f"[{item}] {what}: {measured} (target {target}) -> {yn}" + (f"  [{detail}]" if detail else ""),
              flush=True)


# --- a and c: a fresh engine per repeat: six calibrators, add ir (c), change the bandwidth (a) ------------------

#: the metrics whose values and intervals depend on the bandwidth (TOT is the Brier score)
BANDWIDTH_METRICS = ("cal", "sharpness_gap")


def bench_add_and_bandwidth(rows: Rows, run: str, calibrators, n_boot: int, repeats: int, quick: bool) -> None:
    base = EvalRequest(file=DEMO, run=run, calibrators=tuple(c for c in calibrators if c != "ir"), n_boot=n_boot)
    full = replace(base, calibrators=tuple(calibrators))
    add_s, add_counters, first_s, ret_s, bw_counters, cold_s, partials = [], [], [], [], [], [], []
    for i in range(repeats):
        h0, h1 = (0.05, 0.0625) if i % 2 == 0 else (0.0625, 0.05)
        engine = Engine()
        t = time.perf_counter()
        engine.evaluate(replace(base, bandwidth=h0))
        cold_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        ev = engine.evaluate(replace(full, bandwidth=h0))                     # c: add ir
        add_s.append(time.perf_counter() - t)
        add_counters.append(ev.counters)
        got: list = []
        t = time.perf_counter()
        ev = engine.evaluate(replace(full, bandwidth=h1), on_partial=lambda p: got.append(
            (time.perf_counter() - t, p.pending, len(p.results),                # a: the bandwidth change
             sum(1 for r in p.results for m in BANDWIDTH_METRICS if r.metrics[m].lo == r.metrics[m].lo))))
        ret_s.append(time.perf_counter() - t)
        first_s.append(got[0][0] if got else float("nan"))
        partials.append(got[0] if got else None)
        bw_counters.append(ev.counters)
        print(f"  repeat {i + 1}: cold {len(base.calibrators)} calibrators {cold_s[-1]:.2f} s; add ir "
              f"{add_s[-1]:.3f} s; bandwidth {h0:g} -> {h1:g}: first partial {first_s[-1]:.3f} s, return "
              f"{ret_s[-1]:.3f} s; timings {dict(ev.timings)}", flush=True)
    # pending, every calibrator's point estimates, and no interval yet for the metrics the bandwidth changes
    first_ok = all(p is not None and p[1] and p[2] == len(calibrators) and p[3] == 0 for p in partials)
    c_bw = bw_counters[-1]
    shape = lambda c: (c.fitted, c.scored, len(c.resampled))  # noqa: E731  (resampled names carry the bandwidth)
    same = all(shape(c) == shape(c_bw) for c in bw_counters)
    n_cal = len(calibrators)
    rows.add("a", f"bandwidth change 0.05 <-> 0.0625 after a {n_cal}-calibrator evaluation ({n_boot} resamples) "
                  f"of {run}: first partial result (point estimates and curves)",
             f"median {fmt_s(median(first_s))} of {repeats}", "< 0.3 s", median(first_s) < 0.3 and first_ok,
             f"repeats (s): {fmt_list(first_s)}; in every repeat the first partial result was pending, held all "
             f"{len(calibrators)} calibrators' point estimates and curves, and no CAL or sharpness-gap interval "
             f"yet (the other metrics' intervals, TOT = Brier's included, do not depend on the bandwidth and come "
             f"from the cache): "
             f"{'yes' if first_ok else 'NO'}", short="bandwidth change, first partial")
    rows.add("a", "the same change: every interval (return)", f"median {fmt_s(median(ret_s))} of {repeats}",
             "< 1.5 s", median(ret_s) < 1.5, short="bandwidth change, every interval",
             detail=f"repeats (s): {fmt_list(ret_s)}; engine timings of the last: "
             + ", ".join(f"{k} {v:.3f} s" for k, v in ev.timings.items()))
    rows.add("a", "the same change: counters", counters_text(c_bw) + ("" if same else " (differed between repeats)"),
             "fitted 0, scored 0", len(c_bw.fitted) == 0 and len(c_bw.scored) == 0 and same,
             f"resampled: {', '.join(c_bw.resampled)}", short="bandwidth change, counters")
    c_add = add_counters[-1]
    same = all(shape(c) == shape(c_add) for c in add_counters)
    rows.add("c", f"add ir to an evaluated {n_cal - 1}-calibrator set ({n_boot} resamples): time",
             f"median {fmt_s(median(add_s))} of {repeats}", "(no time target; counters below)", None,
             f"repeats (s): {fmt_list(add_s)}; the cold {n_cal - 1}-calibrator evaluation before it: median "
             f"{fmt_s(median(cold_s))}")
    rows.add("c", "add ir: counters", counters_text(c_add) + ("" if same else " (differed between repeats)"),
             "fitted 1, scored 1", c_add.fitted == ("ir",) and len(c_add.scored) == 1 and same, "",
             short="add a calibrator, counters")


# --- b: re-show an evaluated run -----------------------------------------------------------------------------

def bench_reshow(rows: Rows, runs, calibrators, n_boot: int, repeats: int) -> None:
    engine = Engine()
    reqs = [EvalRequest(file=DEMO, run=r, calibrators=tuple(calibrators), n_boot=n_boot) for r in runs]
    cold = []
    for req in reqs:
        t = time.perf_counter()
        engine.evaluate(req)
        cold.append(time.perf_counter() - t)
    times, counters = [], []
    for i in range(repeats):                    # A, B, A, ...: each re-shows a run after the other one
        t = time.perf_counter()
        ev = engine.evaluate(reqs[i % 2])
        times.append(time.perf_counter() - t)
        counters.append(ev.counters)
    ok_counters = all(not c.fitted and not c.scored and not c.resampled for c in counters)
    rows.add("b", f"re-show an evaluated run ({runs[0]} after {runs[1]} and back, {len(calibrators)} calibrators, "
                  f"{n_boot} resamples, same Engine)",
             f"median {fmt_s(median(times))} of {repeats}", "< 0.1 s", median(times) < 0.1 and ok_counters,
             f"re-shows (s): {fmt_list(times)}; counters fitted 0, scored 0, resampled 0 in every re-show: "
             f"{'yes' if ok_counters else 'NO'}; the cold evaluations first: {fmt_list(cold)} s",
             short="re-show a run")


# --- d: the ablation through the CLI, whole process -----------------------------------------------------------

def timed_process(cmd, env=None) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, out


def cli_env() -> dict:
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        env.pop(k, None)                       # the CLI sets them itself, as for a user
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def bench_ablation(rows: Rows, run: str, n_boot: int, pairs: int) -> None:
    common = [sys.executable, "-m", "calibview.cli.program", "metrics", DEMO, "--run", run, "--calibrators", "none,ts,hb",
              "--n-boot", str(n_boot), "--quiet"]
    ablation = common + ["--bins", "10,15,20", "--bandwidth", "0.02,0.05,0.1", "--kernel", "gaussian,epanechnikov"]
    env = cli_env()
    abl, one, ratios = [], [], []
    for i in range(pairs):
        order = [("abl", ablation), ("one", common)] if i % 2 == 0 else [("one", common), ("abl", ablation)]
        got = {}
        for name, cmd in order:
            got[name], _ = timed_process(cmd, env)
        abl.append(got["abl"])
        one.append(got["one"])
        ratios.append(got["abl"] / got["one"])
        print(f"  pair {i + 1}: ablation {got['abl']:.2f} s, one setting {got['one']:.2f} s", flush=True)
    r = median(abl) / median(one)
    rows.add("d", f"ablation through the CLI: `calibview metrics` {run}, none,ts,hb, {n_boot} resamples, bins "
                  f"10,15,20 x bandwidth 0.02,0.05,0.1 x kernel gaussian,epanechnikov (18 settings) vs one "
                  f"setting; whole process wall time",
             f"{median(abl):.2f} s vs {median(one):.2f} s (medians of {pairs} interleaved pairs): ratio {r:.2f}",
             "ratio <= 1.3", r <= 1.3,
             f"ablation (s): {fmt_list(abl)}; one setting (s): {fmt_list(one)}; per-pair ratios: {fmt_list(ratios)}",
             short="CLI ablation / one setting")


# --- e: 21,843 classes through the CLI, whole process ---------------------------------------------------------

def bench_large_k(rows: Rows, rows_n: int, k: int, keep: str | None) -> None:
    import synthetic

    tmp = tempfile.TemporaryDirectory(dir=keep)
    path = os.path.join(tmp.name, f"large_k_{rows_n}x{k}.h5")
    t = time.perf_counter()
    synthetic.write(path, {"val": rows_n, "test": rows_n}, k, dtype="float16", seed=0)
    print(f"  wrote {path} ({os.path.getsize(path) / MB:,.0f} MB) in {time.perf_counter() - t:.1f} s", flush=True)
    try:
        cmd = [sys.executable, "-c", _DRIVER, str(ROOT), "metrics", path, "--run", "synthetic/bench",
               "--calibrators", "none,ts,vs", "--n-boot", "1000", "--quiet"]
        wall, out = timed_process(cmd, cli_env())
    finally:
        tmp.cleanup()
    d = json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("DRIVER ")][-1][7:])
    if not d["file"].startswith(str(ROOT)):
        raise RuntimeError(f"the driver imported {d['file']}, not this checkout's calibview")
    f32 = 2 * rows_n * k * 4
    above = d["peak_hwm"] - d["base_hwm"]
    rows.add("e", f"{rows_n:,} x {k:,} float16 val + test (synthetic), `calibview metrics` none,ts,vs, 1000 "
                  f"resamples: wall time of the whole process",
             f"{wall:.1f} s", "<= 30 s", wall <= 30,
             f"interpreter start and imports {d['import_s']:.1f} s, cli.main {d['main_s']:.1f} s",
             short=f"{k:,} classes, wall time")
    rows.add("e", "the same process: peak resident memory (VmHWM) above its VmHWM after importing calibview, "
                  "torch and the engine",
             f"{above / MB:,.0f} MB = {above / f32:.2f}x the float32 logits of both splits ({f32 / MB:,.0f} MB)",
             f"<= 1.5x ({1.5 * f32 / MB:,.0f} MB)", above <= 1.5 * f32,
             f"after imports: VmHWM {d['base_hwm'] / MB:,.0f} MB, VmRSS {d['base_rss'] / MB:,.0f} MB; peak VmHWM "
             f"{d['peak_hwm'] / MB:,.0f} MB (VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's "
             f"peak, {d['base_maxrss'] / MB:,.0f} MB here)", short=f"{k:,} classes, peak memory")
    table = [ln for ln in out.stdout.splitlines() if not ln.startswith("DRIVER ")]
    print("\n".join("    " + ln for ln in table[:12]))


# --- g: the headline command ------------------------------------------------------------------------------------

def bench_headline(rows: Rows, n: int, k: int, keep: str | None, repeats: int) -> None:
    """`calibview metrics FILE --json --fit-split val --eval-split test --calibrators none,ts` (every metric, 1000
    resamples) on 2 x n x k float32 logits: whole-process wall time, median of ``repeats``."""
    import synthetic

    tmp = tempfile.TemporaryDirectory(dir=keep)
    path = os.path.join(tmp.name, f"headline_{n}x{k}.h5")
    synthetic.write(path, {"val": n, "test": n}, k, dtype="float32", seed=0)
    walls, logged = [], []
    try:
        cmd = [sys.executable, "-m", "calibview", "metrics", path, "--json", "--fit-split", "val",
               "--eval-split", "test", "--calibrators", "none,ts", "--log-level", "info"]
        for _ in range(repeats):
            wall, out = timed_process(cmd, cli_env())
            walls.append(wall)
            line = [ln for ln in out.stderr.splitlines() if ln.startswith("calibview: evaluated ")][-1]
            logged.append(float(re.search(r"([0-9.]+) s$", line).group(1)))
    finally:
        tmp.cleanup()
    med = statistics.median(walls)
    rows.add("g", f"`calibview metrics FILE --json --fit-split val --eval-split test --calibrators none,ts` on 2 x "
                  f"{n:,} x {k:,} float32 logits (synthetic; every metric, 1000 resamples): whole-process wall time",
             f"median {med:.2f} s of {repeats}", "< 5 s", med < 5,
             f"wall (s): {fmt_list(walls)}; the `calibview: evaluated ...` log line (s): {fmt_list(logged)}",
             short="headline command, wall time")


# --- f: window vs CLI ----------------------------------------------------------------------------------------

def bench_window(rows: Rows, pairs: int, quick: bool) -> None:
    cmd = [sys.executable, str(HERE / "bench_window.py"), "--pairs", str(pairs)] + (["--quick"] if quick else [])
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        env.pop(k, None)                       # each side sets them as its program does
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    _, out = timed_process(cmd, env)
    print("\n".join("    " + ln for ln in out.stdout.splitlines() if not ln.startswith("RESULT ")), flush=True)
    r = json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    rows.add("f", f"window vs CLI: {r['run']}, {','.join(r['calibrators'])}, {r['n_boot']} resamples, both cold, "
                  f"request to last interval (window: in the GUI thread after drawing; CLI: compute time)",
             f"window {r['median_window_s']:.2f} s vs CLI {r['median_cli_s']:.2f} s (medians of {r['pairs']} "
             f"interleaved pairs): ratio {r['ratio']:.2f}", "ratio <= 1.2", r["ratio"] <= 1.2,
             f"window (s): {fmt_list(r['window_s'])}; CLI (s): {fmt_list(r['cli_s'])}; window first partial (s): "
             f"{fmt_list(r['first_partial_s'])}; GUI thread CPU during each window run (s): "
             f"{fmt_list(r.get('gui_thread_cpu_s', []))}; OpenMP window {r['window_omp']}, CLI "
             f"{','.join(r['cli_omp'])}", short="window / CLI")


# --- the section -------------------------------------------------------------------------------------------------

def machine() -> str:
    return (f"{os.cpu_count()} CPUs ({cpu_name()}), Python {platform.python_version()}, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), {platform.system()} {platform.machine()}")


def section(rows: Rows, args, started: str, elapsed: float, load: tuple, skipped: list[str]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = [BEGIN, "## The engine's interactive targets: `python benchmarks/bench_engine.py"
             + (" --quick" if args.quick else "") + "`", "",
             f"Written by `benchmarks/bench_engine.py` on {started} in {elapsed:.0f} s; {machine()}; load average "
             f"{load[0]:.2f} at the start, {load[1]:.2f} at the end. Every figure below is measured in that run; "
             f"`holds` is computed by the script from the measured value and the target beside it.", ""]
    if args.quick:
        lines += ["**`--quick` run: tiny sizes, one repeat; the targets are the full run's and do not apply here.**",
                  ""]
    lines += ["| | measurement | measured | target | holds |", "|---|---|---|---|---|"]
    for r in rows.rows:
        yn = "n/a" if r["holds"] is None else ("yes" if r["holds"] else "**no**")
        lines.append(f"| {r['item']} | {esc(r['what'])} | {esc(r['measured'])} | {esc(r['target'])} | {yn} |")
    lines += ["", "Details (raw repeats, in run order):", ""]
    lines += [f"- {r['item']}: {r['detail']}" for r in rows.rows if r["detail"]]
    for s in skipped:
        lines.append(f"- not run: {s}")
    held = [r for r in rows.rows if r["holds"] is not None]
    missed = [r for r in held if not r["holds"]]
    lines += ["", f"Summary: {len(held) - len(missed)} of {len(held)} targets hold"
              + (("; missed: " + "; ".join(f"{r['item']} ({r['short']}: {r['measured']}; target {r['target']})"
                                          for r in missed)) if missed else ".")]
    lines += ["", "How each is measured: (a, c) a fresh Engine per repeat evaluates the set without ir "
              "at one bandwidth, then adds ir (c), then changes the bandwidth to the other of 0.05 and 0.0625 "
              "(a; alternating per repeat), timing `Engine.evaluate` in this process with `on_partial` recording "
              "the first partial result; (b) one Engine evaluates two runs, then re-shows them alternately; "
              "(d, e) whole `python -m calibview.cli.program metrics` subprocesses, wall time from the parent (interpreter "
              "start and imports included); (e) the memory from VmHWM inside that process; (g) `python -m calibview metrics` "
              "subprocesses, wall time from the parent, the file generated by benchmarks/synthetic.py; (f) "
              "`bench_window.py` as a subprocess. Absolute times move with the load of a shared machine; "
              "ratios (d, f) are medians of interleaved pairs.", END]
    return "\n".join(lines) + "\n"




def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repeat, no 21,843-class run (< 1 minute)")
    p.add_argument("--out", default=str(HERE / "RESULTS.md"), help="markdown file whose section is replaced")
    p.add_argument("--repeats", type=int, default=None, help="repeats of a, b, c (default 5; --quick 1)")
    p.add_argument("--pairs", type=int, default=None, help="interleaved pairs of d and f (default 5; --quick 1)")
    p.add_argument("--skip-large", action="store_true", help="skip e (the 21,843-class run)")
    p.add_argument("--skip-window", action="store_true", help="skip f (needs PySide6)")
    p.add_argument("--tmp", default=None, help="directory for e's temporary HDF5 file (default: the system's)")
    args = p.parse_args(argv)
    if not calibview.__file__.startswith(str(ROOT)):
        raise SystemExit(f"imported {calibview.__file__}, not this checkout's calibview")
    repeats = args.repeats or (1 if args.quick else 5)
    pairs = args.pairs or (1 if args.quick else 5)
    run_a, run_b = "resnet110-brier/cifar100", "resnet110-brier/cifar10"
    calibrators = ("none", "ts", "hb", "ir") if args.quick else SEVEN
    n_boot = 50 if args.quick else 1000
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    print(f"calibview from {calibview.__file__}; {machine()}", flush=True)
    rows, skipped = Rows(), []
    main_run = run_b if args.quick else run_a
    bench_add_and_bandwidth(rows, main_run, calibrators, n_boot, repeats, args.quick)
    bench_reshow(rows, (run_a, run_b), ("none", "ts") if args.quick else calibrators, n_boot,
                 max(3, repeats) if args.quick else max(5, repeats))
    bench_ablation(rows, main_run, 20 if args.quick else 200, pairs)
    if args.quick or args.skip_large:
        skipped.append("e (the 21,843-class run): " + ("--quick" if args.quick else "--skip-large"))
    else:
        bench_large_k(rows, 10_000, 21_843, args.tmp)
    if args.quick:
        skipped.append("g (the headline command): --quick")
    else:
        bench_headline(rows, 50_000, 1000, args.tmp, 3)
    if args.skip_window:
        skipped.append("f (window vs CLI): --skip-window")
    else:
        bench_window(rows, pairs, args.quick)
    text = section(rows, args, started, time.perf_counter() - t0, (load0, os.getloadavg()[0]), skipped)
    write_section(Path(args.out), text, BEGIN, END)
    print(f"wrote the bench_engine section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
