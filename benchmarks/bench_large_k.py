"""ImageNet-21k scale calibrator fits: 10,000 x 21,843 float16 val and test splits (time, iterations, memory).

    python benchmarks/bench_large_k.py [--rows 10000] [--classes 21843] [--methods ts,vs] [--seed 0]

Generates the two splits in memory with :func:`synthetic.logits` (a chunk of rows at a time, so generating them
costs no float32 copy), fits each calibrator on val, applies it to test in chunks of ``metrics.chunk_rows(K)``
rows and prints per calibrator: the fit time, the L-BFGS iterations (Newton passes for ts), the apply time,
the test NLL, and the peak resident memory of the fit and of the apply above the memory held before it
(VmHWM, reset through /proc/self/clear_refs before each phase). At the end: ru_maxrss above the post-import
baseline for the whole run, next to the float32 size of both splits (the issue's budget is 1.5x that).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]      # this checkout's calibview, not an installed one
import synthetic  # noqa: E402

from calibview.core import calibrators as calib  # noqa: E402
from calibview.core.stats import metrics  # noqa: E402

MB = 1 << 20


def rss() -> int:
    return _status("VmRSS")


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return [int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":")][0]


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def split(rng, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    z = np.empty((n, k), dtype=np.float16)
    y = np.empty(n, dtype=np.int64)
    for start in range(0, n, 500):
        stop = min(n, start + 500)
        z[start:stop], y[start:stop] = synthetic.logits(rng, stop - start, k, np.float16)
    return torch.from_numpy(z), torch.from_numpy(y)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--classes", type=int, default=21_843)
    ap.add_argument("--methods", default="ts,vs")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    base = maxrss()
    base_rss = rss()
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    zv, yv = split(rng, a.rows, a.classes)
    zt, yt = split(rng, a.rows, a.classes)
    f32 = 2 * a.rows * a.classes * 4
    present = int((torch.bincount(yv, minlength=a.classes) > 0).sum())
    absent_test = float((torch.bincount(yv, minlength=a.classes)[yt] == 0).double().mean())
    print(f"data: 2 x {a.rows:,} x {a.classes:,} float16 in {time.perf_counter() - t0:.1f} s; "
          f"{present:,} classes occur in val; {absent_test:.1%} of the test rows have a class absent from val; "
          f"torch threads {torch.get_num_threads()}")
    rows = metrics.chunk_rows(a.classes)
    for name in a.methods.split(","):
        held = rss()
        can_reset = reset_peak()
        t = time.perf_counter()
        fitted = calib.fit(name, zv, yv)
        fit_s = time.perf_counter() - t
        fit_peak = (_status("VmHWM") - held) if can_reset else float("nan")
        p = fitted.params
        steps = p.get("iterations", p.get("passes", ""))
        held = rss()
        reset_peak()
        t = time.perf_counter()
        nll = 0.0
        with torch.inference_mode():
            for start in range(0, a.rows, rows):
                lp = fitted.apply(zt[start:start + rows])
                nll -= float(lp.gather(1, yt[start:start + rows, None]).sum())
        apply_s = time.perf_counter() - t
        apply_peak = (_status("VmHWM") - held) if can_reset else float("nan")
        extra = ""
        if name == "ts":
            extra = f" T = {p['temperature']:.6g}"
        elif "fit_nll" in p:
            extra = f" fit NLL {p['fit_nll']:.6g}, converged {p.get('converged')}"
            if "absent" in p:
                extra += f", absent = {p['absent']!r}"
        print(f"{name:>4}: fit {fit_s:7.2f} s ({steps} iterations/passes){extra}; fit peak +{fit_peak / MB:,.0f} MB; "
              f"apply {apply_s:5.2f} s, peak +{apply_peak / MB:,.0f} MB; test NLL {nll / a.rows:.6g}")
        for w in fitted.warnings:
            print(f"      warning: {w}")
        del fitted
    print(f"ru_maxrss above the post-import baseline: {(maxrss() - base) / MB:,.0f} MB (RSS before the data "
          f"{base_rss / MB:,.0f} MB); float32 logits of both splits: {f32 / MB:,.0f} MB (budget 1.5x: "
          f"{1.5 * f32 / MB:,.0f} MB); total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
