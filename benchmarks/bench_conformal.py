"""``calibview conformal`` at 50,000 x 1,000: three scores (lac, aps, raps) and two alphas (0.1, 0.05) with
``--n-boot 0``, the calibration and evaluation splits 50,000 samples each. Prints the compute time after loading:
the splits are in-memory arrays (calibview.core.io.arrays, read by the engine like a file), so the time is the
softmax, the scores, the quantiles and the sets, not a disk read. Not run by the tests.

    python benchmarks/bench_conformal.py [--n 50000] [--k 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibview.core.evaluation.conformal import evaluate_conformal  # noqa: E402
from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.io import arrays  # noqa: E402


def main() -> None:
    """Write a synthetic run, warm the reader, then time evaluate_conformal."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=1_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    splits = {}
    for name in ("val", "test"):
        # a calibrated model: one favoured class per sample, labels drawn from the softmax itself (Gumbel-max).
        # Its 999 other classes keep a third of the mass, so the sets are hundreds of classes wide (mean sizes
        # printed below), far wider than an ImageNet model's: nearly every row takes the full sort, the worst case
        z = rng.standard_normal((args.n, args.k))
        z[np.arange(args.n), rng.integers(0, args.k, args.n)] += rng.normal(8.0, 2.0, args.n)
        y = (z + rng.gumbel(size=z.shape)).argmax(axis=1)
        splits[name] = ("logits", z.astype(np.float32), y)
    held = arrays.register("bench", "synthetic", splits)          # registered while this reference lives
    path = held.path
    engine = Engine()
    evaluate_conformal(engine, path, "bench/synthetic", alphas=(0.1,), scores=("lac",), n_boot=0,
                       device="cpu")                                   # warm-up: imports, first allocations
    t0 = time.perf_counter()
    ev = evaluate_conformal(engine, path, "bench/synthetic", alphas=(0.1, 0.05), scores=("lac", "aps", "raps"),
                            n_boot=0, device="cpu")
    dt = time.perf_counter() - t0
    whole = [r for r in ev.records if r["group"] == "all"]
    print(f"conformal {args.n:,} x {args.k:,} (val and test), 3 scores x 2 alphas, n_boot 0: {dt:.2f} s")
    for r in whole:
        print(f"  {r['score']:5s} alpha={r['alpha']:<5g} coverage {r['coverage']:.4f} mean size "
              f"{r['mean_set_size']:.2f}")


if __name__ == "__main__":
    main()
