"""CPU/GPU agreement and GPU time of the headline report, for a machine lent with a CUDA GPU.

    benchmarks/gpu_check.sh                         # on the GPU machine: writes its section of benchmarks/RESULTS.md
    benchmarks/gpu_check.sh --device cpu --rows 2000 --classes 20 --results /tmp/R.md    # its logic, anywhere

Such a machine has its own CUDA build of torch, no network and only the working tree, so nothing is installed:
the checkout runs in place (``python3 -m calibview`` with the repository on PYTHONPATH) and the data is generated
here by ``benchmarks/synthetic.py`` (val and test splits of ``--rows`` x ``--classes`` float32 logits). Steps:

1. the tests marked ``cuda`` (``pytest -m cuda``; when nothing carries the marker, ``-k cuda``; skipped, and said
   so, when pytest is not installed);
2. ``calibview metrics FILE --json --fit-split val --eval-split test --calibrators none,ts`` with the CLI's default
   resamples, ``--repeats`` times with ``--device cpu`` (the reference) and as many with ``--device DEVICE``, each
   side in one process after an untimed warm-up run of the same command, so CUDA start-up (context, handles, lazy
   kernel loading) is not in the time. The time is the one the CLI reports in its ``calibview: evaluated ...``
   log line (``--log-level info``). Each run is ``python -m calibview`` itself (``runpy``, its stdout and stderr
   redirected to files at the descriptor level), with PySide6, shiboken6 and pyqtgraph made unimportable, as they
   may be absent there;
3. every JSON value of every device run against the first reference run, with the tolerances of ``TOLERANCES``;
4. one section of ``--results`` between ``<!-- gpu_check -->`` and ``<!-- /gpu_check -->`` (replaced; appended when
   the file has none; the file is created if missing), every figure measured in this run.

With ``--device cpu`` both sides run on the CPU: the agreement is then cpu against cpu and the GPU time target is
written as not measured. Exit status: 0 when every verdict holds, 1 when one is ``**no**``, 2 when a step failed
(nothing is written then).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- gpu_check -->", "<!-- /gpu_check -->"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sections.py beside this script
from sections import write_section  # noqa: E402
#: the window's dependencies, made unimportable in the timed processes
BLOCKED = ("PySide6", "shiboken6", "pyqtgraph")
#: the CLI's log line, e.g. ``calibview: evaluated synthetic/bench fit=val eval=test: fitted 1, reused 0, scored 2,
#: 4.21 s`` (calibview/core/evaluation/job.py writes it; seconds with two decimals)
LOG_LINE = re.compile(r"^calibview: evaluated (?P<run>\S+) fit=(?P<fit>\S+) eval=(?P<eval>\S+): fitted (?P<fitted>\d+), "
                      r"reused (?P<reused>\d+), scored (?P<scored>\d+), (?P<seconds>[0-9.]+) s\s*$", re.M)
TARGET_S = 1.0
#: what the metrics command and benchmarks/synthetic.py import (the window's packages are not needed)
NEEDED = ("numpy", "scipy", "h5py", "torch")
#: interval ends of metrics that are ratios of integer counts: float32 holds those sums exactly (below 2^24)
COUNT_RATIOS = ("accuracy", "acc_at_cov", "cov_at_acc")
#: class -> (bound on |device - cpu| / max(1, |cpu|), the JSON keys it covers, why)
TOLERANCES = {
    "exact": (0.0, "every integer, string, null and the nonfinite map: n, k, bins, n_boot, seed, the names, "
                   "options, and every null (non-finite) estimate or bound",
              "counts and settings; the same resamples are drawn on every device (seeded on the CPU)"),
    "float64": (1e-9, "every float that is not an interval end (accuracy, nll, brier, ece, ..., auroc, "
                      "bandwidth, level) and the interval ends of accuracy, acc_at_cov*, cov_at_acc*",
                "float64 on both devices, only the order of summation differs (~1e-13); the counted ends are "
                "ratios of integer counts, which the float32 products hold exactly"),
    "float32": (1e-5, "every other *_lo and *_hi (nll, brier, ece, ..., smece, cal, aurc, auroc ends)",
                "the bootstrap computes only the fluctuation (W - 1) @ F in float32 around an exact float64 "
                "centre, summed in a device-dependent order; a float32 sum of N = 50,000 order-1 terms is off by "
                "~1e-8..1e-7 of its mean, and ratios and differences of such sums (per-bin gaps, the smoothing "
                "estimators) by up to ~1e-6 in metric units; an interval end is an order statistic of the "
                "resampled values, so it moves by no more than they do. 1e-5 is 10x that and far below an "
                "interval's width at these sizes (row e gives the largest difference as a fraction of it)"),
}


class _NoWindow(importlib.abc.MetaPathFinder):
    """Makes the window's dependencies unimportable (as on a machine without them), noting every attempt."""

    attempts: list = []

    def find_spec(self, name, path=None, target=None):
        """Refuse ``BLOCKED`` packages (raises ModuleNotFoundError), defer everything else."""
        if name.split(".")[0] in BLOCKED:
            self.attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by gpu_check)", name=name)
        return None


@contextlib.contextmanager
def _redirected(out: Path, err: Path):
    """Point file descriptors 1 and 2 (and sys.stdout/sys.stderr above them) at two files, as a shell would."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(out, "wb") as fo, open(err, "wb") as fe:
        os.dup2(fo.fileno(), 1)
        os.dup2(fe.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _calibview(argv: list) -> int:
    """``python -m calibview ARGV`` in this process; its exit status."""
    import runpy
    sys.argv = ["calibview", *argv]
    try:
        runpy.run_module("calibview", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def child(a) -> int:
    """One side (one device): warm-up and timed runs of the CLI in this process; writes ``manifest.json``."""
    sys.meta_path.insert(0, _NoWindow())
    # the benchmarks folder is sys.path[0] of this script; calibview comes from the checkout on PYTHONPATH only
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    from calibview.startup import configure_openmp
    configure_openmp()                                      # as the CLI does, before torch loads
    out = Path(a.dir)
    info = {"device": a.device, "runs": []}
    t = time.perf_counter()
    import torch
    info["import_torch_s"] = time.perf_counter() - t
    info.update(torch=torch.__version__, cuda=torch.version.cuda, threads=torch.get_num_threads())
    if a.device.startswith("cuda"):
        if not torch.cuda.is_available():
            info["error"] = f"--device {a.device}: torch {torch.__version__} sees no CUDA GPU here"
            (out / "manifest.json").write_text(json.dumps(info))
            return 2
        t = time.perf_counter()
        torch.zeros(1, device=a.device)
        torch.cuda.synchronize()
        info["cuda_init_s"] = time.perf_counter() - t
        info["gpu"] = torch.cuda.get_device_name(torch.device(a.device))
    for i in range(a.warmup + a.repeats):
        so, se = out / f"run{i}.json", out / f"run{i}.err"
        t = time.perf_counter()
        with _redirected(so, se):
            rc = _calibview(a.argv)
        info["runs"].append({"warmup": i < a.warmup, "rc": rc, "wall_s": time.perf_counter() - t,
                             "stdout": str(so), "stderr": str(se)})
        if rc:
            break
    info["blocked_imports"] = sorted(set(_NoWindow.attempts))
    (out / "manifest.json").write_text(json.dumps(info))
    return 0


# --- the parent ----------------------------------------------------------------------------------------------------

def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_tests(a) -> dict:
    """The tests marked cuda (``-k cuda`` when none is): the selection, exit status, pytest's summary counts and
    the files it could not collect, with why (a machine lent for this may lack the test extras, e.g. sklearn)."""
    if importlib.util.find_spec("pytest") is None:
        return {"ran": False, "why": "pytest is not installed here"}
    base = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-p", "no:pytest-qt",
            "--continue-on-collection-errors"]
    paths = a.pytest_paths.split()
    for select in (["-m", "cuda"], ["-k", "cuda"]):
        t = time.perf_counter()
        p = subprocess.run(base + select + paths, cwd=ROOT, env=_env(), capture_output=True, text=True,
                           timeout=a.timeout)
        tail = [ln for ln in p.stdout.strip().splitlines() if ln.strip()]
        summary = tail[-1].strip("= ") if tail else ""
        counts = {w.rstrip("s") if w.startswith("error") else w: int(n) for n, w in re.findall(
            r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", summary)}
        uncollected = {}
        for block in re.split(r"^_+ ERROR collecting ", p.stdout, flags=re.M)[1:]:
            name = block.split(" ", 1)[0]
            why = re.search(r"^E\s+(\w+(?:Error|Exception)\b.*)$", block, re.M)
            uncollected[name] = why.group(1).strip() if why else "?"
        res = {"ran": True, "select": " ".join(select), "paths": a.pytest_paths, "rc": p.returncode,
               "seconds": time.perf_counter() - t, "summary": summary, "counts": counts,
               "uncollected": uncollected, "output": p.stdout[-3000:] + p.stderr[-2000:]}
        if sum(counts.get(w, 0) for w in ("passed", "failed", "skipped", "xfailed", "xpassed")) or \
                counts.get("error", 0) > len(uncollected):
            break                        # something was selected: no fallback
    return res


def run_side(a, device: str, d: Path, data: Path) -> dict:
    """One child process (its files in ``d``) of ``--repeats`` timed runs on ``device``: its manifest with each
    run's log line and JSON rows; raises RuntimeError with the output when a run fails."""
    d.mkdir(exist_ok=True)
    argv = ["metrics", str(data), "--json", "--fit-split", "val", "--eval-split", "test", "--calibrators",
            "none,ts", "--device", device, "--log-level", "info"]
    if a.n_boot is not None:
        argv += ["--n-boot", str(a.n_boot)]
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", "--dir", str(d), "--device", device,
           "--repeats", str(a.repeats), "--warmup", str(0 if a.no_warmup else 1), "--", *argv]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=a.timeout)
    man = json.loads((d / "manifest.json").read_text()) if (d / "manifest.json").exists() else {}
    if p.returncode or "error" in man:
        raise RuntimeError(man.get("error") or f"the {device} process failed ({p.returncode}):\n{p.stderr[-3000:]}")
    for r in man["runs"]:
        err = Path(r["stderr"]).read_text()
        if r["rc"]:
            raise RuntimeError(f"calibview {' '.join(argv)} exited {r['rc']} on {device}:\n{err[-3000:]}")
        lines = list(LOG_LINE.finditer(err))
        if not lines:
            raise RuntimeError(f"no 'calibview: evaluated ...' line on {device}'s stderr:\n{err[-3000:]}")
        r["seconds"] = sum(float(m["seconds"]) for m in lines)
        r["log"] = [m.group(0).strip() for m in lines]
        r["counters"] = {k: sum(int(m[k]) for m in lines) for k in ("fitted", "reused", "scored")}
        r["rows"] = json.loads(Path(r["stdout"]).read_text())
    man["argv"] = argv
    print(f"gpu_check: {device}: " + ", ".join(("warm-up " if r["warmup"] else "") + f"{r['seconds']:.2f} s"
                                             for r in man["runs"]), flush=True)
    return man


def tolerance_class(key: str, value) -> str:
    """Which entry of ``TOLERANCES`` the JSON ``key`` with the reference ``value`` falls under."""
    if not isinstance(value, float):
        return "exact"
    base, _, end = key.rpartition("_")
    if base and end in ("lo", "hi") and not base.startswith(COUNT_RATIOS):
        return "float32"
    return "float64"


def compare(ref: list, dev: list) -> dict:
    """Every value of the device's rows against the reference rows: per tolerance class the number compared, the
    failures and the largest scaled differences (key, calibrator, cpu, device, difference, fraction of width)."""
    out = {c: {"compared": 0, "failed": [], "worst": []} for c in TOLERANCES}
    if len(ref) != len(dev):
        out["exact"]["compared"] += 1
        out["exact"]["failed"].append(("rows", "-", len(ref), len(dev), None, None))
    for r, g in zip(ref, dev):
        who = str(r.get("calibrator"))
        for key in sorted(set(r) | set(g)):
            a, b = r.get(key, "<missing>"), g.get(key, "<missing>")
            cls = tolerance_class(key, a)
            out[cls]["compared"] += 1
            if cls == "exact" or not isinstance(b, float):
                if a != b or type(a) is not type(b):
                    out[cls]["failed"].append((key, who, a, b, None, None))
                continue
            diff = abs(a - b) / max(1.0, abs(a))
            lo, hi = r.get(key[:-2] + "lo"), r.get(key[:-2] + "hi")
            width = abs(a - b) / (hi - lo) if cls == "float32" and isinstance(lo, float) and \
                isinstance(hi, float) and hi > lo else None
            item = (key, who, a, b, diff, width)
            out[cls]["worst"].append(item)
            if not diff <= TOLERANCES[cls][0]:
                out[cls]["failed"].append(item)
    for c in out.values():
        c["worst"] = sorted(c["worst"], key=lambda t: -t[4])[:5]
    return out


def machine(side: dict) -> str:
    """The CPU, Python, torch and (when used) the GPU."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    gpu = f", {side['gpu']} (CUDA {side['cuda']})" if side.get("gpu") else ", no GPU used"
    return (f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, torch {side['torch']} "
            f"({side['threads']} threads), {platform.system()} {platform.machine()}{gpu}")


def _timed(side: dict) -> list:
    return [r for r in side["runs"] if not r["warmup"]]


def _fmt(x) -> str:
    return "null" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))


def section(a, tests: dict, ref: dict, dev: dict, agree: list, started: str, elapsed: float, gen: dict,
            load: tuple) -> tuple:
    """(the Markdown section, whether every verdict holds)."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    gpu = a.device != "cpu"
    rows = []                                            # (item, check, measured, target, holds or None)
    if not tests["ran"]:
        rows.append(("a", "tests marked `cuda`", f"not run: {tests['why']}", "all pass", None))
    else:
        c, unc = tests["counts"], tests["uncollected"]
        bad = c.get("failed", 0) + c.get("error", 0) - len(unc)         # failures and errors of selected tests
        missing = all("ModuleNotFoundError" in why for why in unc.values())
        holds = False if bad or not missing else (True if c.get("passed", 0) else None)
        m = f"{tests['summary']} (exit {tests['rc']})"
        if unc:
            m += f"; {len(unc)} files not collected: " + "; ".join(f"{k}: {v}" for k, v in unc.items())
        rows.append(("a", f"tests: `pytest {tests['select']} {tests['paths']}`"
                          + (" (no test is marked `cuda`)" if tests["select"] == "-k cuda" else ""),
                     m, "all selected pass; a file not collected only for a missing module", holds))
    dt, rt = [r["seconds"] for r in _timed(dev)], [r["seconds"] for r in _timed(ref)]
    med_d, med_r = statistics.median(dt), statistics.median(rt)
    measured = (f"median {med_d:.2f} s of {len(dt)} on {a.device} vs {med_r:.2f} s of {len(rt)} on cpu: "
                f"{med_r / med_d:.1f}x" if med_d > 0 else f"{med_d:.2f} s on {a.device} vs {med_r:.2f} s on cpu")
    if not gpu:
        measured = f"not measured (no GPU: cpu against cpu); cpu {med_d:.2f} s of {len(dt)} vs {med_r:.2f} s of {len(rt)}"
    rows.append(("b", f"time of the report on {a.device} (its log line; CUDA start-up excluded by a warm-up run)",
                 measured, f"< {TARGET_S:g} s on a current datacenter GPU", (med_d < TARGET_S) if gpu else None))
    names = {"exact": "counts, settings, names and nulls", "float64": "float64 statistics",
             "float32": "interval ends from float32 fluctuation products"}
    for item, cls in zip("cde", TOLERANCES):
        tol = TOLERANCES[cls][0]
        compared = sum(x[cls]["compared"] for x in agree)
        failed = [f for x in agree for f in x[cls]["failed"]]
        worst = max((w for x in agree for w in x[cls]["worst"]), key=lambda t: t[4], default=None)
        m = f"{len(failed)} of {compared} values differ"
        if worst is not None and not worst[4]:
            m += "; every value identical"
        elif worst is not None:
            m += f"; largest {worst[4]:.1e} ({worst[0]}, {worst[1]})"
            if worst[5] is not None:
                m += f" = {worst[5]:.1e} of its interval's width"
        if failed:
            m += "; first: " + ", ".join(f"{f[0]} ({f[1]}) cpu {_fmt(f[2])} vs {_fmt(f[3])}" for f in failed[:3])
        target = "identical" if cls == "exact" else f"<= {tol:g} x max(1, \\|cpu\\|)"
        rows.append((item, f"{names[cls]} ({a.device} against cpu, every run)", m, target, not failed))
    attempts = sorted(set(ref["blocked_imports"]) | set(dev["blocked_imports"]))
    rows.append(("f", "runs with PySide6, shiboken6, pyqtgraph unimportable",
                 "imports attempted: " + (", ".join(attempts) if attempts else "none"), "none attempted",
                 not attempts))
    held = [r for r in rows if r[4] is not None]
    ok = all(r[4] for r in held)
    first = _timed(ref)[0]["rows"][0]
    args = " ".join(sys.argv[1:])
    lines = [BEGIN, "## CPU/GPU agreement and GPU time: `benchmarks/gpu_check.sh`", "",
             f"Written by `benchmarks/gpu_check.sh{' ' + args if args else ''}` on {started} in {elapsed:.0f} s; "
             f"{machine(dev)}; load average {load[0]:.2f} at the start, {load[1]:.2f} at the end. Data: "
             f"`benchmarks/synthetic.py`, val + test {a.rows:,} x {a.classes:,} float32 (seed 0), written in "
             f"{gen['seconds']:.1f} s. Command: `calibview {' '.join(dev['argv'][:1] + ['FILE'] + dev['argv'][2:])}`"
             f" (n = {first.get('n')}, k = {first.get('k')}, {first.get('n_boot')} resamples). Every figure below "
             f"is measured in that run; `holds` is computed by the script from the measured value and the target "
             f"beside it.", ""]
    if not gpu:
        lines += ["**`--device cpu` run: both sides on the CPU; it tests the script, and the GPU target is not "
                  "measured.**", ""]
    lines += ["| | check | measured | target | holds |", "|---|---|---|---|---|"]
    for item, check, m, target, holds in rows:
        yn = "n/a" if holds is None else ("yes" if holds else "**no**")
        lines.append(f"| {item} | {esc(check)} | {esc(m)} | {target} | {yn} |")
    lines += ["", "Details (in run order):", ""]
    for name, side in (("cpu", ref), (a.device + " (device)", dev)):
        runs = "; ".join(("warm-up " if r["warmup"] else "") + f"{r['seconds']:.2f} s (process {r['wall_s']:.2f} s, "
                         f"fitted {r['counters']['fitted']}, reused {r['counters']['reused']}, scored "
                         f"{r['counters']['scored']})" for r in side["runs"])
        extra = f"; CUDA context {side['cuda_init_s']:.2f} s" if "cuda_init_s" in side else ""
        lines.append(f"- {name}: importing torch {side['import_torch_s']:.2f} s{extra}; runs (log line): {runs}")
    lines.append(f"- first log line on {a.device}: `{dev['runs'][0]['log'][0]}`")
    if tests["ran"]:
        lines.append(f"- tests: {tests['seconds']:.1f} s")
    for cls in ("float64", "float32"):
        worst = sorted((w for x in agree for w in x[cls]["worst"] if w[4]), key=lambda t: -t[4])[:5]
        lines.append(f"- largest {cls} differences: " + (", ".join(
            f"{w[0]} ({w[1]}) {w[4]:.1e}" + (f" ({w[5]:.1e} of the width)" if w[5] is not None else "")
            for w in worst) if worst else "none, every value identical"))
    lines += ["", "Tolerances, per JSON key (the difference is |device - cpu| / max(1, |cpu|)):", ""]
    for cls, (tol, keys, why) in TOLERANCES.items():
        lines.append(f"- {cls} ({'exactly equal' if cls == 'exact' else f'<= {tol:g}'}): {keys}. Why: {why}.")
    summary = f"{len([r for r in held if r[4]])} of {len(held)} checks hold"
    missed = [f"{r[0]} ({r[2]})" for r in held if not r[4]]
    lines += ["", f"Summary: {summary}" + ("; missed: " + "; ".join(missed) if missed else "."), END]
    return "\n".join(lines) + "\n", ok




def main(argv=None) -> int:
    """The check (see the module docstring); ``_child`` runs one side (internal)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        ap = argparse.ArgumentParser()
        for opt in ("--dir", "--device"):
            ap.add_argument(opt, required=True)
        ap.add_argument("--repeats", type=int, required=True)
        ap.add_argument("--warmup", type=int, required=True)
        ap.add_argument("argv", nargs=argparse.REMAINDER)
        a = ap.parse_args(argv[1:])
        a.argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
        return child(a)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="the device checked against the CPU (default cuda; cpu: test "
                                                     "the script without a GPU)")
    ap.add_argument("--rows", type=int, default=50_000, help="samples per split (default 50,000)")
    ap.add_argument("--classes", type=int, default=1000, help="classes (default 1,000)")
    ap.add_argument("--n-boot", type=int, default=None, help="resamples (default: the CLI's, 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per device (default 3; median)")
    ap.add_argument("--no-warmup", action="store_true", help="no untimed first run per device")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"), help="Markdown file to write")
    ap.add_argument("--pytest-paths", default="tests/core tests/cli", help="where pytest looks for the cuda tests")
    ap.add_argument("--no-tests", action="store_true", help="skip the pytest step")
    ap.add_argument("--workdir", default=None, help="where the data goes (default: a temporary folder, removed)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per step")
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.rows < 2 or a.classes < 2:
        ap.error("--repeats must be at least 1, --rows and --classes at least 2")
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0, load0 = time.perf_counter(), os.getloadavg()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="gpu_check."))
    work.mkdir(parents=True, exist_ok=True)
    try:
        missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
        if missing:
            raise RuntimeError(f"calibview's core needs {', '.join(missing)}, not installed for {sys.executable}")
        data = work / f"synthetic_{a.rows}x{a.classes}.h5"
        t = time.perf_counter()
        p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synthetic.py"), str(data), "--val",
                            str(a.rows), "--test", str(a.rows), "--classes", str(a.classes)], cwd=ROOT, env=_env(),
                           timeout=a.timeout, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"benchmarks/synthetic.py failed ({p.returncode}):\n{p.stderr[-3000:]}")
        gen = {"seconds": time.perf_counter() - t}
        print(f"gpu_check: data {a.rows:,} x {a.classes:,} x 2 splits in {gen['seconds']:.1f} s", flush=True)
        tests = {"ran": False, "why": "--no-tests"} if a.no_tests else run_tests(a)
        print(f"gpu_check: tests: {tests.get('summary') or tests.get('why')}", flush=True)
        dev = run_side(a, a.device, work / "dev", data)     # first: a missing GPU stops the check at once
        ref = run_side(a, "cpu", work / "ref", data)
        agree = [compare(_timed(ref)[0]["rows"], r["rows"]) for r in _timed(dev)]
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
        print(f"gpu_check: error: {e}", file=sys.stderr)
        return 2
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    text, ok = section(a, tests, ref, dev, agree, started, time.perf_counter() - t0, gen,
                       (load0[0], os.getloadavg()[0]))
    write_section(Path(a.results), text, BEGIN, END)
    print(text, end="")
    print(f"gpu_check: wrote its section of {a.results}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
