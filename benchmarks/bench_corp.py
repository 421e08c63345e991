"""What the bandwidth-free columns add to an evaluation without bands, measured in one run (prints, writes nothing):

    python benchmarks/bench_corp.py [--n 50000] [--k 100] [--repeats 3] [--quick]

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
from calibview.core.evaluation import stages  # noqa: E402
from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.stats import points  # noqa: E402
from calibview.core.stats.corp import parts as corp  # noqa: E402
from calibview.core.stats.corp import refinement as refine  # noqa: E402

CALIBRATORS = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")


class _NoRefinement(refine.Refinement):
    """The refinement split switched off: nothing collected, a NaN result."""

    def __init__(self, n, k, seed=0):
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
        print(f"a. CORP + decomposition, {len(CALIBRATORS)} calibrators, N={args.n:,}: {corp_s:.3f} s "
              f"(target < 0.2 s: {'yes' if corp_s < 0.2 else 'NO'})")

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
        print(f"c. calibration tests (1000 redraws), {len(CALIBRATORS)} calibrators: "
              f"{time.perf_counter() - t:.2f} s (resample stage)")


if __name__ == "__main__":
    main()
