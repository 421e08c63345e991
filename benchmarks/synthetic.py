"""Synthetic logits for the benchmarks, written chunk by chunk so a file can be larger than memory.

    python benchmarks/synthetic.py OUT.h5 --val 2000000 --test 2000000 --classes 1000 --dtype float16

The model is informative and over-confident (temperature scaling fits T ~ 1.7 at K = 10,
1.2 at K = 1,000): logits are Gaussian noise
with the label's entry raised, times a scale. The layout is calibview's (``/synthetic/bench/<split>``), written
uncompressed in HDF5 chunks of about 1 MB, under a temporary name moved into place at the end.
"""

from __future__ import annotations

import argparse
import os
import time

import h5py
import numpy as np


def logits(rng: np.random.Generator, n: int, k: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, k, n)
    z = rng.standard_normal((n, k), dtype=np.float32)
    z[np.arange(n), y] += 2.0 * rng.standard_normal(n, dtype=np.float32) + 4.0
    z *= 3.0
    return z.astype(dtype, copy=False), y


def write(path: str, splits: dict[str, int], k: int, dtype: str = "float32", seed: int = 0,
          chunk_rows: int = 1 << 14) -> str:
    """Write ``{split: rows}`` of K classes to ``path`` (replaced atomically); returns the path."""
    tmp = f"{path}.part{os.getpid()}"
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    with h5py.File(tmp, "w") as f:
        for name, n in splits.items():
            g = f.create_group(f"synthetic/bench/{name}")
            rows = max(1, min(n, (1 << 20) // (k * dt.itemsize)))
            sds = g.create_dataset("logits", shape=(n, k), dtype=dt, chunks=(rows, k))
            lds = g.create_dataset("labels", shape=(n,), dtype=np.int64)
            for start in range(0, n, chunk_rows):
                stop = min(n, start + chunk_rows)
                z, y = logits(rng, stop - start, k, dt)
                sds[start:stop] = z
                lds[start:stop] = y
    os.replace(tmp, path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--val", type=int, default=50_000)
    ap.add_argument("--test", type=int, default=50_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--dtype", default="float32", choices=("float16", "float32", "float64"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    write(a.out, {"val": a.val, "test": a.test}, a.classes, a.dtype, a.seed)
    size = os.path.getsize(a.out)
    print(f"wrote {a.out}: {size / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
