"""How long torch's idle OpenMP threads should spin: calibview's setting (``calibview.startup.configure_openmp``,
GOMP_SPINCOUNT=3000, or ``--spin N``) against fully passive threads (OMP_WAIT_POLICY=PASSIVE, the setting before it), in
interleaved pairs of fresh processes, each side set up only through its environment before torch loads:

1. a small split, no load: ``evaluate`` of none,ts (no intervals) on 10,000 x 10 synthetic logits per split, the
   median of 15 evaluations in each process (after 2 warm-ups), wall and CPU per evaluation;
2. the seven-calibrator CIFAR-100 demo evaluation (1000 resamples) through ``calibview metrics``, whole process,
   with and without two busy loops beside it (the hazard of spinning threads: a preempted team member makes its
   partners spin; libgomp's default spin took 18 and 57 s there, passive 16-24 s).

Prints the medians and the per-pair ratios; writes nothing (timings of a shared machine move by tens of percent
from hour to hour, so only the interleaved ratios mean anything). Run it alone.

    python benchmarks/bench_openmp.py [--pairs 3] [--skip-load] [--spin N]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIDES: dict = {}         # name -> environment of that side; set by main()

_SMALL = """
import sys, time
sys.path.insert(0, sys.argv[2])
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.stream import tune_allocator
tune_allocator()                                   # as the CLI's engine runs
req = EvalRequest(file=sys.argv[1], run="synthetic/bench", calibrators=("none", "ts"), n_boot=0)
for _ in range(2):
    evaluate(req)
wall, cpu = [], []
for _ in range(15):
    t, c = time.perf_counter(), time.process_time()
    evaluate(req)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
wall.sort(); cpu.sort()
print(wall[7], cpu[7])
"""


def _env(side: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    env.update(side)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _busy() -> None:
    while True:
        pass


def small(pairs: int, path: str) -> None:
    res: dict = {name: [] for name in SIDES}
    for _ in range(pairs):
        for name, side in SIDES.items():
            out = subprocess.run([sys.executable, "-c", _SMALL, path, str(HERE)], env=_env(side), check=True,
                                 capture_output=True, text=True)
            res[name].append(tuple(float(x) for x in out.stdout.split()))
    print("1. none+ts evaluate of 10,000 x 10, no load (median of 15 per process; ms per evaluation):")
    for name, v in res.items():
        print(f"   {name:24s} wall {', '.join(f'{w * 1e3:.0f}' for w, _ in v)}; "
              f"CPU {', '.join(f'{c * 1e3:.0f}' for _, c in v)}")
    ratios = [a[0] / b[0] for a, b in zip(*res.values())]
    print(f"   wall ratio spin / passive per pair: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}")


def demo(pairs: int, load: bool) -> None:
    import calibview

    cmd = [sys.executable, "-m", "calibview", "metrics", str(calibview.demo_path()), "--run",
           "resnet110-brier/cifar100", "--calibrators", "none,ts,ts-grid,vs,hb,ir,mrr", "--quiet"]
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(2 if load else 0)]
    for h in hogs:
        h.start()
    res: dict = {name: [] for name in SIDES}
    try:
        for _ in range(pairs):
            for name, side in SIDES.items():
                t = time.perf_counter()
                subprocess.run(cmd, env=_env(side), check=True, capture_output=True, cwd=tempfile.gettempdir())
                res[name].append(time.perf_counter() - t)
    finally:
        for h in hogs:
            h.terminate()
    where = "beside two busy loops" if load else "no load"
    print(f"2. the seven-calibrator demo (1000 resamples), whole process, {where} (s):")
    for name, v in res.items():
        print(f"   {name:24s} {', '.join(f'{x:.1f}' for x in v)}; median {statistics.median(v):.1f}")
    ratios = [a / b for a, b in zip(*res.values())]
    print(f"   ratio spin / passive per pair: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--skip-load", action="store_true", help="skip the demo runs (about 3 minutes)")
    ap.add_argument("--spin", default=None, help="the spin count to compare (default: calibview's SPIN_COUNT)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import synthetic
    from calibview.startup import SPIN_COUNT

    spin = args.spin or SPIN_COUNT
    SIDES[f"spin {spin}" + (" (calibview)" if spin == SPIN_COUNT else "")] = {"GOMP_SPINCOUNT": spin,
                                                                            "KMP_BLOCKTIME": "0"}
    SIDES["passive"] = {"OMP_WAIT_POLICY": "PASSIVE"}

    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, interleaved pairs: {args.pairs}")
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic.write(os.path.join(tmp, "small.h5"), {"val": 10_000, "test": 10_000}, 10)
        small(args.pairs, path)
    if not args.skip_load:
        demo(args.pairs, load=False)
        demo(args.pairs, load=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
