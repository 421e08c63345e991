"""What the bandwidth-free columns add to an evaluation without bands, measured in one run (prints; with
``--markdown FILE`` it also writes its section of FILE, between ``<!-- bench_corp -->`` and ``<!-- /bench_corp
-->``):

    python benchmarks/bench_corp.py [--n 50000] [--k 100] [--repeats 3] [--quick] [--markdown benchmarks/RESULTS.md]

On a synthetic run (``synthetic.write``: val and test of N x K float32 logits), seven calibrators
(none,ts,ts-grid,vs,hb,ir,mrr), ``n_boot`` 0:

a. CORP and the decomposition (the ``("corp",)`` point part: PAV, MCB / DSC / UNC of the Brier and, for K = 2,
   the log score) of the seven calibrators, timed alone on their scored vectors: target under 0.2 s;
b. a whole fresh-engine evaluation with every new column against the same evaluation with the CORP part and the
   refinement split switched off (monkeypatched to NaN and to a no-op), interleaved repeats, medians: the
   difference and the ratio (the refinement split is O(N K): it is what most of the difference is);
c. the calibration tests (1000 redraws: p_ece at the bins, the SKCE test) of the seven, which run in the resample
   stage, for scale.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]          # this checkout's calibview, not an installed one

from calibview.startup import configure_openmp  # noqa: E402

configure_openmp()

import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from sections import write_section  # noqa: E402
from calibview.core.evaluation import stages  # noqa: E402
from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.stats import points  # noqa: E402
from calibview.core.stats.corp import parts as corp  # noqa: E402
from calibview.core.stats.corp import refinement as refine  # noqa: E402

CALIBRATORS = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")
BEGIN, END = "<!-- bench_corp -->", "<!-- /bench_corp -->"
TARGET_S = 0.2


class _NoRefinement(refine.Refinement):
    """The refinement split switched off: nothing collected, a NaN result."""

    def __init__(self, n, k, seed=0, resampled=False):
        self.n = n

    def add(self, *a):
        pass

    def nodes(self):
        return 1.0

    def add_node(self, *a):
        pass

    def result(self, nll_finite):
        return refine.RefinementResult(np.nan, np.nan, np.nan, 1.0, np.zeros((self.n, 8), np.float32))


def _without(fn):
    """``fn()`` with the CORP part and the refinement split switched off."""
    old_ref, old_pv = stages.Refinement, corp.point_values
    stages.Refinement = _NoRefinement
    corp.point_values = lambda *a, **k: {m: np.nan for m in corp.CORP_METRICS + corp.REFINEMENT_METRICS}
    try:
        return fn()
    finally:
        stages.Refinement, corp.point_values = old_ref, old_pv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="5,000 x 10, one repeat")
    ap.add_argument("--markdown", default=None, metavar="FILE", help="also write this benchmark's section of FILE")
    args = ap.parse_args()
    if args.quick:
        args.n, args.k, args.repeats = 5_000, 10, 1
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic.write(str(Path(tmp) / "bench.h5"), {"val": args.n, "test": args.n}, args.k)
        req = EvalRequest(file=path, run="synthetic/bench", calibrators=CALIBRATORS, n_boot=0, seed=0,
                          device="cpu")
        eng = Engine()
        eng.evaluate(req)                                  # warm: imports, first-call costs
        scored = eng.scored(req)

        t = time.perf_counter()
        for sc in scored.values():
            points.compute_part(sc.stats, sc.classwise_sums, ("corp",), refinement=sc.refinement)
        corp_s = time.perf_counter() - t
        verdict = "yes" if corp_s < TARGET_S else "**no**"
        print(f"a. CORP + decomposition, {len(CALIBRATORS)} calibrators, N={args.n:,}: {corp_s:.3f} s "
              f"(target < {TARGET_S:g} s: {verdict})")

        with_s, without_s = [], []
        for r in range(args.repeats):
            for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                t = time.perf_counter()
                if which == 0:
                    Engine().evaluate(req)
                    with_s.append(time.perf_counter() - t)
                else:
                    _without(lambda: Engine().evaluate(req))
                    without_s.append(time.perf_counter() - t)
        a, b = statistics.median(with_s), statistics.median(without_s)
        print(f"b. evaluation without bands, N={args.n:,} x K={args.k}, {len(CALIBRATORS)} calibrators "
              f"(median of {args.repeats}): with the new columns {a:.2f} s, without {b:.2f} s; "
              f"added {a - b:+.2f} s, ratio {a / b:.3f}")

        t = time.perf_counter()
        for sc in scored.values():
            st = sc.stats
            corp.p_ece(st.conf, st.correct, 15, 1000, 0)
            corp.skce_test(st.conf, st.correct, 1000, 0)
        tests_s = time.perf_counter() - t
        print(f"c. calibration tests (1000 redraws), {len(CALIBRATORS)} calibrators: {tests_s:.2f} s (resample stage)")
    if args.markdown:
        when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        size = (f"2 x {args.n:,} x {args.k} float32 (synthetic), {len(CALIBRATORS)} calibrators "
                f"({','.join(CALIBRATORS)})")
        text = (f"{BEGIN}\n## The bandwidth-free columns: `python benchmarks/bench_corp.py` ({when})\n\n"
                f"{size}, `n_boot` 0.\n\n| row | measured | target | holds |\n|---|---|---|---|\n"
                f"| a. CORP and its decomposition (PAV; MCB / DSC / UNC) of the {len(CALIBRATORS)} calibrators, on "
                f"their scored vectors | {corp_s:.3f} s | < {TARGET_S:g} s | {verdict} |\n"
                f"| b. a fresh-engine evaluation with every new column against the same with CORP and the "
                f"refinement split switched off (medians of {args.repeats}, interleaved) | {a:.2f} s vs {b:.2f} s: "
                f"{a - b:+.2f} s, {a / b:.2f}x (the O(N K) refinement split is most of it) | for scale | |\n"
                f"| c. the calibration tests (p_ece at 15 bins and the SKCE test, 1000 redraws) of the "
                f"{len(CALIBRATORS)}, computed with the intervals in the resample stage | {tests_s:.2f} s | "
                f"for scale | |\n"
                f"{END}\n")
        write_section(args.markdown, text, BEGIN, END)


if __name__ == "__main__":
    main()
