"""Speed of the evaluation core against its floor and the peer libraries, measured in one run.

    python benchmarks/bench_core.py [--n 50000] [--k 1000] [--repeats 3]

Prints one table (median of --repeats): each calibview row beside the peer or floor it is compared with, the
ratio and the agreement of the values. Nothing is asserted: machines are shared and noisy, so read ratios.
Synthetic logits are written once to a temporary HDF5 file (uncompressed, like a fresh export).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

from calibview.core import calibrators as calib
from calibview.core import smoothing
from calibview.core.evaluate import EvalRequest, evaluate
from calibview.core.logits import read_split, write_run
from calibview.core.metrics import binned_metrics, sample_stats


def timed(fn, repeats):
    fn()                                   # warm-up: page cache, allocator, lazy imports
    out, times = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def make_file(path, n, k, seed=0):
    rng = np.random.default_rng(seed)
    for split in ("val", "test"):
        y = rng.integers(0, k, n)
        z = (rng.normal(size=(n, k)) * 2.0).astype(np.float32)
        z[np.arange(n), y] += rng.normal(4.0, 2.0, n).astype(np.float32)   # informative, over-confident
        write_run(path, "synthetic", f"n{n}-k{k}", split, logits=z, labels=y, compression=None)


def row(name, ours, peer, peer_name, agree=""):
    ratio = f"{peer / ours:7.1f}x" if peer else "       "
    peer_s = f"{peer * 1e3:10.1f}" if peer else " " * 10
    print(f"{name:44s} {ours * 1e3:10.1f} {peer_s}  {peer_name:34s} {ratio}  {agree}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, N={args.n}, "
          f"K={args.k}, median of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.h5")
        make_file(path, args.n, args.k)
        run = f"synthetic/n{args.n}-k{args.k}"
        print(f"{'':44s} {'ours ms':>10s} {'peer ms':>10s}  {'peer / floor':34s} {'ratio':>8s}")

        # Loading: chunked, validated read vs a bare h5py read of the same dataset (the floor).
        def bare():
            with h5py.File(path, "r") as f:
                return f[f"/{run}/test/logits"][...]
        t_floor, raw = timed(bare, args.repeats)
        t_read, data = timed(lambda: read_split(path, run, "test"), args.repeats)
        row("read a split (validated)", t_read, t_floor, "bare h5py ds[...] (floor)")

        z = torch.from_numpy(raw)
        y = torch.from_numpy(data.labels.copy())
        zv = torch.from_numpy(read_split(path, run, "val").scores.copy())
        yv = torch.from_numpy(read_split(path, run, "val").labels.copy())

        # Top-label ECE from logits.
        from torchmetrics.functional.classification import multiclass_calibration_error

        def ours_ece():
            s = sample_stats(z, y, n_bins=15, transform=lambda c: torch.log_softmax(c.double(), 1))
            return binned_metrics(s.conf, s.correct, 15)["ece"]
        t_ours, e_ours = timed(ours_ece, args.repeats)
        t_tm, e_tm = timed(lambda: float(multiclass_calibration_error(torch.softmax(z.double(), 1), y,
                                                                     num_classes=args.k, n_bins=15)),
                           args.repeats)
        row("ECE (15 bins) from logits, all metrics' pass", t_ours, t_tm, "torchmetrics (float64 softmax)",
            f"|diff| {abs(e_ours - e_tm):.1e}")

        # SmoothECE.
        s = sample_stats(z, y, n_bins=15, transform=lambda c: torch.log_softmax(c.double(), 1))
        import relplot
        t_ours, v_ours = timed(lambda: smoothing.smece(s.conf, s.correct)[0], args.repeats)
        t_rp, v_rp = timed(lambda: relplot.smECE(s.conf, s.correct), args.repeats)
        row("SmoothECE", t_ours, t_rp, "relplot 1.0.3 smECE", f"|diff| {abs(v_ours - v_rp):.1e}")

        # Temperature scaling fit on the val split.
        def lbfgs():
            t = torch.nn.Parameter(torch.ones(1))
            opt = torch.optim.LBFGS([t], lr=0.01, max_iter=50)
            def closure():
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(zv / t, yv)
                loss.backward()
                return loss
            opt.step(closure)
            return float(t.detach())
        t_ours, t_fit = timed(lambda: calib.fit_temperature(zv, yv)[0], args.repeats)
        t_lb, t_lbfgs = timed(lbfgs, args.repeats)
        nll = lambda t: float(torch.nn.functional.cross_entropy(zv.double() / t, yv))
        row("temperature scaling fit (converged)", t_ours, t_lb, "torch LBFGS lr=0.01 max_iter=50",
            f"T {t_fit:.6f} vs {t_lbfgs:.6f}; NLL gap {nll(t_lbfgs) - nll(t_fit):.1e}")

        # One log-softmax pass over the (N, K) matrix: the unit of the floor of a none+ts report.
        def one_pass():
            for i in range(0, z.shape[0], 4096):
                torch.log_softmax(z[i:i + 4096].double(), 1)
        t_pass, _ = timed(one_pass, args.repeats)
        passes = calib.fit_temperature(zv, yv)[1]
        row("one float64 log-softmax pass", t_pass, None, "")

        # The whole report: none + ts, every metric, 1000-resample intervals.
        req = EvalRequest(file=path, run=run, calibrators=("none", "ts"), n_boot=1000)
        evs = []
        t_all, _ = timed(lambda: evs.append(evaluate(req)), args.repeats)
        after = statistics.median(e.elapsed_s - e.timings["read"] for e in evs)
        parts = evs[-1].timings
        row("report none+ts, 1000 resamples, after loading", after, None, "")
        print("    parts (last run, ms): " + ", ".join(f"{k} {v * 1e3:.0f}" for k, v in parts.items()))
        floor = t_floor + (passes + 2) * t_pass
        print(f"    floor = read + {passes} TS passes + 2 metric passes = {floor * 1e3:.0f} ms; "
              f"report total {t_all * 1e3:.0f} ms = {t_all / floor:.1f}x the floor")

        # A bandwidth change on 1,000,000 samples (the GUI slider): binned once, then O(grid).
        rng = np.random.default_rng(1)
        c = rng.beta(5, 1, 1_000_000)
        a = (rng.random(c.size) < c ** 1.3).astype(float)
        stats = smoothing.bin_stats(c, a, (c - a) ** 2)
        hs = np.geomspace(0.005, 0.5, 200)
        times = []
        for h in hs:
            t = time.perf_counter()
            smoothing.sharpness_curve(stats, float(h))
            times.append(time.perf_counter() - t)
        row("bandwidth change, 1M samples (median of 200)", statistics.median(times), None, "",
            f"max {max(times) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
