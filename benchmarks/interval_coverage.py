"""How often each interval method covers the true calibration error, on synthetic runs with a known truth, and
how often an interval had to be widened to contain its estimate. Writes its table into docs/DEFINITIONS.md
(between the ``<!-- interval_coverage -->`` markers) with ``--write``.

Each repetition draws a K-class test split: logits z ~ N(0, 2^2) per class, labels drawn from softmax(z), and the
stored logits z / T (T = 1: calibrated; T = 0.6: overconfident). The truth of a binned metric is its population
value with the same bins, the plug-in on one large draw (``--truth-n`` samples, whose own bias and noise are far
below the intervals' widths). The engine evaluates the ``none`` calibrator with ``--n-boot`` resamples once per
repetition; the three methods read their intervals off the same resamples (the engine's cache).

    python benchmarks/interval_coverage.py --reps 200 --write
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.io.writer import write_run  # noqa: E402
from calibview.core.stats import metrics as cm  # noqa: E402

METRICS = ("ece", "rmsce", "mce", "ace", "classwise_ece", "accuracy")
METHODS = ("percentile", "basic", "bca")
MARK = "<!-- interval_coverage -->"


def draw(rng, n: int, k: int, temperature: float):
    """((n, K) float32 stored logits, (n,) labels)."""
    z = rng.normal(size=(n, k)) * 2.0
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return (z / temperature).astype(np.float32), y


def population(k: int, temperature: float, n: int, bins: int, seed: int) -> dict:
    """The population value of each metric: the plug-in on one draw of ``n`` samples."""
    import torch

    rng = np.random.default_rng(seed)
    zs, ys = [], []
    for a in range(0, n, 200_000):
        z, y = draw(rng, min(200_000, n - a), k, temperature)
        zs.append(z)
        ys.append(y)
    z = torch.from_numpy(np.concatenate(zs)).double()
    y = torch.from_numpy(np.concatenate(ys))
    s = cm.sample_stats(torch.log_softmax(z, 1), y, n_bins=bins)
    out = cm.binned_metrics(s.conf, s.correct, bins)
    out["classwise_ece"] = cm.classwise_ece(s)[0]
    out["accuracy"] = float(s.correct.mean())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--n", type=int, default=1000, help="test samples per repetition")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--bins", type=int, default=15)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--truth-n", type=int, default=2_000_000)
    ap.add_argument("--write", action="store_true", help="write the table into docs/DEFINITIONS.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    lines = []
    for temperature, label in ((1.0, "calibrated (T = 1)"), (0.6, "overconfident (T = 0.6)")):
        true = population(args.k, temperature, args.truth_n, args.bins, seed=99)
        cover = {(m, meth): 0 for m in METRICS for meth in METHODS}
        widened = {(m, meth): 0 for m in METRICS for meth in METHODS}
        rng = np.random.default_rng(int(temperature * 1000))
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                path = os.path.join(tmp, f"r{rep}.h5")
                z, y = draw(rng, args.n, args.k, temperature)
                write_run(path, "net", "syn", "test", logits=z, labels=y)
                eng = Engine()
                for meth in METHODS:
                    req = EvalRequest(file=path, run="net/syn", calibrators=("none",), fit_split=None,
                                      n_boot=args.n_boot, seed=rep, bins=args.bins, interval=meth)
                    est = eng.evaluate(req).result("none").metrics
                    for m in METRICS:
                        e = est[m]
                        cover[(m, meth)] += int(e.lo <= true[m] <= e.hi)
                        widened[(m, meth)] += int(e.method.endswith("-widened"))
                os.remove(path)
        lines.append(f"\n**{label}**, N = {args.n:,}, K = {args.k}, {args.bins} bins, {args.n_boot} resamples, "
                     f"{args.reps} repetitions; true values: " +
                     ", ".join(f"{m} {true[m]:.4f}" for m in METRICS) + "\n")
        lines.append("| metric | " + " | ".join(f"{m} coverage (widened)" for m in METHODS) + " |")
        lines.append("|---|" + "---|" * len(METHODS))
        for m in METRICS:
            cells = [f"{cover[(m, meth)] / args.reps:.1%} ({widened[(m, meth)] / args.reps:.0%})" for meth in METHODS]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        print("\n".join(lines[-(len(METRICS) + 3):]), flush=True)
    text = (f"{MARK}\nMeasured by `benchmarks/interval_coverage.py --reps {args.reps}` "
            f"({time.perf_counter() - t0:.0f} s). Nominal level 95 %. Coverage: the share of repetitions whose "
            "interval contains the true value; in brackets, the share whose interval was widened to contain its "
            "own estimate.\n" + "\n".join(lines) + f"\n{MARK}")
    if args.write:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "DEFINITIONS.md")
        doc = open(path, encoding="utf-8").read()
        pat = re.compile(re.escape(MARK) + ".*?" + re.escape(MARK), re.S)
        doc = pat.sub(lambda _: text, doc) if pat.search(doc) else doc.rstrip("\n") + "\n\n" + text + "\n"
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(doc)
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
