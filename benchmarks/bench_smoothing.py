"""Timings of calibview.core.stats.smooth_ece and .smoothing against relplot 1.0.3 (prints, never asserts).

Run: python benchmarks/bench_smoothing.py
- SmoothECE vs relplot.smECE on N = 10,000 and 50,000 (median of 5, speed ratio, absolute difference)
- sharpness_curve: bin once, then 100 bandwidth changes, on 1,000,000 and 10,000,000 samples
- bootstrap: smece_resampled and cal_resampled for R = 1000 resamples of N = 50,000
"""

from __future__ import annotations

import time

import numpy as np
import relplot
import torch

import calibview
from calibview.core.stats.smooth_ece import smece, smece_resampled
from calibview.core.stats.smoothing import bin_stats, cal_resampled, cal_tot, sharpness_curve


def median_time(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def synthetic(n, seed, power):
    rng = np.random.default_rng(seed)
    conf = rng.beta(5.0, 1.0, size=n)
    correct = (rng.random(n) < conf ** power).astype(np.float64)
    loss = (1.0 - conf) ** 2 + (1.0 - correct) * conf
    return conf, correct, loss


def resample_counts(n, r, seed=0):
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (r, n), generator=gen) + torch.arange(r)[:, None] * n
    return torch.bincount(idx.view(-1), minlength=r * n).view(r, n).to(torch.float32)


def bench_smece():
    print("SmoothECE vs relplot.smECE (median of 5)")
    print(f"{'data':<34}{'N':>8}{'relplot ms':>12}{'ours ms':>10}{'ratio':>8}{'|diff|':>11}{'sigma*':>10}")
    cases = [(f"synthetic {'calibrated' if p == 1 else 'overconfident'} (power {p})", n, p)
             for n in (10_000, 50_000) for p in (1.0, 1.5)]
    for label, n, power in cases:
        conf, correct, _ = synthetic(n, 1, power)
        smece(conf, correct)                                   # warm caches (kernel transforms, FFT plans)
        t_ref, (ref, ref_sigma) = median_time(lambda: relplot.smECE(conf, correct, return_width=True))
        t_ours, (ours, sigma) = median_time(lambda: smece(conf, correct))
        assert sigma == ref_sigma
        print(f"{label:<34}{n:>8}{t_ref * 1e3:>12.2f}{t_ours * 1e3:>10.2f}{t_ref / t_ours:>8.1f}"
              f"{abs(ours - ref):>11.1e}{sigma:>10.5f}")
    demo = calibview.demo_path()
    if demo.exists():
        from calibview.core.io.logits import read_split
        d = read_split(demo, "resnet110-brier/cifar10", "test")
        p = torch.softmax(torch.from_numpy(d.scores.astype(np.float64)), 1).numpy()
        conf, correct = p.max(1), (p.argmax(1) == d.labels).astype(np.float64)
        t_ref, (ref, _) = median_time(lambda: relplot.smECE(conf, correct, return_width=True))
        t_ours, (ours, sigma) = median_time(lambda: smece(conf, correct))
        print(f"{'CIFAR-10 ResNet-110 (Brier) test':<34}{conf.size:>8}{t_ref * 1e3:>12.2f}{t_ours * 1e3:>10.2f}"
              f"{t_ref / t_ours:>8.1f}{abs(ours - ref):>11.1e}{sigma:>10.5f}")


def bench_curve():
    print("\nsharpness_curve: bin once, then 100 bandwidth changes (h from 0.002 to 0.5)")
    for n in (1_000_000, 10_000_000):
        conf, correct, loss = synthetic(n, 2, 1.3)
        t0 = time.perf_counter()
        stats = bin_stats(conf, correct, loss)
        t_bin = time.perf_counter() - t0
        for kernel in ("gaussian", "epanechnikov"):
            times = []
            for h in np.geomspace(0.002, 0.5, 100):
                t0 = time.perf_counter()
                sharpness_curve(stats, float(h), kernel)
                times.append(time.perf_counter() - t0)
            times = np.array(times) * 1e3
            print(f"  N = {n:>10,}  bin_stats {t_bin * 1e3:7.1f} ms   {kernel:<12} median {np.median(times):.3f} ms"
                  f"   p90 {np.percentile(times, 90):.3f} ms   max {times.max():.3f} ms")
        del conf, correct, loss


def bench_bootstrap():
    print("\nBootstrap, R = 1000 resamples of N = 50,000 (median of 3)")
    counts = resample_counts(50_000, 1000)
    for label, power in (("calibrated (sigma* < 0.01: fine grids)", 1.0), ("overconfident", 1.5)):
        conf, correct, loss = synthetic(50_000, 3, power)
        smece_resampled(conf, correct, counts[:32])             # warm the per-split caches
        t, _ = median_time(lambda: smece_resampled(conf, correct, counts), repeat=3)
        print(f"  smece_resampled  {label:<40} {t:.3f} s")
    for kernel in ("gaussian", "epanechnikov"):
        t, _ = median_time(lambda: cal_resampled(conf, correct, loss, counts, 0.05, kernel), repeat=3)
        print(f"  cal_resampled    h = 0.05 {kernel:<31} {t:.3f} s")
    conf, correct, loss = synthetic(5000, 4, 1.3)
    t, _ = median_time(lambda: cal_tot(conf, correct, loss), repeat=3)
    print(f"  cal_tot exact (dense, N = 5,000)                          {t:.3f} s")
    conf, correct, loss = synthetic(1_000_000, 4, 1.3)
    t, _ = median_time(lambda: cal_tot(conf, correct, loss), repeat=3)
    print(f"  cal_tot grid (N = 1,000,000)                              {t:.3f} s")


if __name__ == "__main__":
    print(f"torch threads: {torch.get_num_threads()}")
    bench_smece()
    bench_curve()
    bench_bootstrap()
