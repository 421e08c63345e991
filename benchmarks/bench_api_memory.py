"""Peak memory of ``calibview.evaluate`` on arrays: 50,000 x 1,000 float32 test and fit arrays, none and ts, in
a fresh process, above the footprint just before the call (the arrays already allocated), against the target of
1.5x the float32 bytes of the two arrays. Writes its section (between ``<!-- bench_api_memory -->`` and
``<!-- /bench_api_memory -->``) of RESULTS.md.

    python benchmarks/bench_api_memory.py [--rows 50000 --classes 1000 --n-boot 0] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN, END = "<!-- bench_api_memory -->", "<!-- /bench_api_memory -->"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sections.py beside this script
from sections import write_section  # noqa: E402
TARGET = 1.5

CHILD = r"""
import json, re, sys, time
from calibview.startup import configure_openmp; configure_openmp()
from calibview.core.io.heap import tune_allocator; tune_allocator()
import numpy as np
import calibview as cv
import calibview.api.evaluation, calibview.api.result      # imports before measuring

def status(key):
    return int(re.search(rf"{key}:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024

n, k, n_boot = (int(a) for a in sys.argv[1:4])
rng = np.random.default_rng(0)
zt, zf = (rng.standard_normal((n, k), dtype=np.float32) * 2 for _ in range(2))
yt, yf = rng.integers(0, k, n), rng.integers(0, k, n)
# the engine's code paths warmed on a small problem, so their one-off allocations are not counted
cv.evaluate(zt[:2000], yt[:2000], fit=(zf[:2000], yf[:2000]), calibrators=["none", "ts"], n_boot=0, device="cpu")
import gc; gc.collect()
open("/proc/self/clear_refs", "w").write("5")          # VmHWM restarts from the current resident size
before = status("VmRSS")
t = time.perf_counter()
res = cv.evaluate(zt, yt, fit=(zf, yf), calibrators=["none", "ts"], n_boot=n_boot, device="cpu")
seconds = time.perf_counter() - t
print(json.dumps({"before": before, "peak": status("VmHWM"), "arrays": zt.nbytes + zf.nbytes, "seconds": seconds,
                  "ece_ts": res["ts"].ece}))
"""




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--n-boot", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, str(args.rows), str(args.classes), str(args.n_boot)],
                         capture_output=True, text=True, env=env, check=True)
    import json

    r = json.loads(out.stdout.strip().splitlines()[-1])
    ratio = (r["peak"] - r["before"]) / r["arrays"]
    verdict = "yes" if ratio <= TARGET else "**no**"
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    text = (f"{BEGIN}\n## calibview.evaluate on arrays: peak memory (bench_api_memory.py, {when})\n\n"
            f"| size | calibrators | resamples | peak above the pre-call footprint | target | holds |\n"
            f"|---|---|---|---|---|---|\n"
            f"| 2 x {args.rows:,} x {args.classes:,} float32 | none, ts | {args.n_boot} | "
            f"{(r['peak'] - r['before']) / 1e6:.0f} MB = {ratio:.2f}x the arrays ({r['arrays'] / 1e6:.0f} MB); "
            f"call {r['seconds']:.1f} s | <= {TARGET}x | {verdict} |\n{END}\n")
    print(text)
    if not args.no_write:
        write_section(args.out, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
