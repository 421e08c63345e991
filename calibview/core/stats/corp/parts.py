"""The engine's view of the bandwidth-free statistics: the metric columns they give, their point values and
bootstrap resamples from one calibrator's per-sample vectors (:class:`calibview.core.stats.metrics.SampleStats`),
and the calibration tests.

- CORP decomposition (:data:`CORP_METRICS`) of the top-label forecast (confidence against correctness): the
  Brier score for every run, the log score for binary runs (K = 2, where it is the NLL). Point values are exact
  (:func:`calibview.core.stats.corp.decomposition.decompose`). Each resample refits PAV on at most ``ATOMS``
  equal-mass groups of the sorted confidences (tie groups whole; every distinct value its own group when there
  are fewer), whose resampled counts and outcome sums are one sparse product with the resample counts.
- Refinement split (:data:`REFINEMENT_METRICS`, :mod:`calibview.core.stats.corp.refinement`); absent without
  logits (top-label runs).
- Tests (:data:`TEST_METRICS`): p-values with no interval, drawn in the resample stage (:func:`p_ece`,
  :func:`skce_test`).
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np
import torch

from calibview.core.stats.corp import significance as sig
from calibview.core.stats.corp.decomposition import decompose
from calibview.core.stats.corp.refinement import RefinementResult, resampled
from calibview.core.stats.corp.reliability import pooled

CORP_METRICS = ("corp_mcb", "corp_dsc", "corp_unc", "corp_mcb_log", "corp_dsc_log", "corp_unc_log")
TEST_METRICS = ("p_ece", "p_skce")
REFINEMENT_METRICS = ("nll_refinement", "nll_calibration", "brier_refinement", "brier_calibration")
#: the metrics of the whole split only, empty in slice records: the refinement split refits a temperature on the
#: logits, which slices do not keep, and the tests' redraws are not repeated per slice
WHOLE_SPLIT_ONLY = frozenset(REFINEMENT_METRICS + TEST_METRICS)
#: groups of the sorted confidences each bootstrap resample's PAV fit is made on
ATOMS = 2048


def point_values(conf: np.ndarray, correct: np.ndarray, k: int, nll: float, brier: float,
                 refinement: Optional[RefinementResult], order: Optional[np.ndarray] = None) -> dict[str, float]:
    """Every metric of CORP_METRICS and REFINEMENT_METRICS (NaN where it does not apply) of (N,) confidences and
    correctness; ``nll``, ``brier`` the calibrator's (full-vector) NLL and Brier score; ``order`` the
    confidences' ascending order, if known."""
    out = {}
    d = decompose(conf, correct, "brier", order)
    out.update(corp_mcb=d["mcb"], corp_dsc=d["dsc"], corp_unc=d["unc"])
    d = decompose(conf, correct, "log", order) if k == 2 else {"mcb": math.nan, "dsc": math.nan, "unc": math.nan}
    out.update(corp_mcb_log=d["mcb"], corp_dsc_log=d["dsc"], corp_unc_log=d["unc"])
    if refinement is None:
        out.update({m: math.nan for m in REFINEMENT_METRICS})
    else:
        out["nll_refinement"] = refinement.nll
        out["nll_calibration"] = (max(0.0, nll - refinement.nll) if np.isfinite(refinement.nll) else math.nan)
        out["brier_refinement"] = refinement.brier
        out["brier_calibration"] = brier - refinement.brier         # at the NLL's temperature: may be < 0
    return out


def _atoms(conf: np.ndarray, order: Optional[np.ndarray] = None) -> np.ndarray:
    """(N,) int64 atom of each sample: its distinct value's rank when there are at most ATOMS distinct values,
    else its equal-mass group of the sorted confidences, a tie group never split (``order``: the confidences'
    ascending order, if known)."""
    ux, inv, _ = pooled(conf, order)
    if ux.size <= ATOMS:
        return inv
    cum = np.cumsum(np.bincount(inv, minlength=ux.size))           # samples up to each distinct value
    group = np.minimum((cum - 1) * ATOMS // conf.size, ATOMS - 1)
    _, dense = np.unique(group, return_inverse=True)
    return dense.reshape(-1)[inv]


def _atom_matrix(atom: np.ndarray, units: Optional[torch.Tensor], correct: np.ndarray, device
                 ) -> torch.Tensor:
    """(2V, units) float32 CSR: per atom, its samples' count and outcome sum in each resampling unit."""
    n_units = atom.size if units is None else int(units.max()) + 1
    unit = np.arange(atom.size) if units is None else units.cpu().numpy()
    v = int(atom.max()) + 1
    rows = np.concatenate([atom, atom + v])
    cols = np.concatenate([unit, unit])
    vals = np.concatenate([np.ones(atom.size), correct])
    keep = vals != 0
    key, inv = np.unique(rows[keep].astype(np.int64) * n_units + cols[keep], return_inverse=True)
    summed = np.bincount(inv.reshape(-1), weights=vals[keep])
    r, c = key // n_units, key % n_units
    crow = np.zeros(2 * v + 1, dtype=np.int64)
    crow[1:] = np.cumsum(np.bincount(r, minlength=2 * v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)          # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(c),
                                       torch.from_numpy(summed.astype(np.float32)), size=(2 * v, n_units),
                                       check_invariants=False).to(device)


def _pav_scores(n_v: np.ndarray, s_v: np.ndarray) -> tuple[float, float]:
    """(mean Brier, mean log score) of the PAV recalibration of atoms with counts ``n_v`` and outcome sums
    ``s_v`` (the fit is constant on an atom), per sample."""
    from scipy.optimize import isotonic_regression
    from scipy.special import xlogy

    seen = n_v > 0.5
    n, s = n_v[seen], s_v[seen]
    r = np.clip(isotonic_regression(s / n, weights=n, increasing=True).x, 0.0, 1.0)
    total = n.sum()
    brier = float((n * r * r - 2.0 * r * s + s).sum() / total)
    log = float(-(xlogy(s, r) + xlogy(n - s, 1.0 - r)).sum() / total)
    return brier, log


def resample(boot, block, k: int, refinement: Optional[RefinementResult]) -> dict[str, np.ndarray]:
    """(R_b,) resampled CORP_METRICS (log ones for K = 2 only) and REFINEMENT_METRICS (with a refinement) of one
    block of resamples; ``boot`` a :class:`calibview.core.stats.bootstrap.SampleBootstrap` (its features and
    helper store are used), ``block`` a :class:`calibview.core.stats.resampling.ResampleBlock`."""
    s = boot.stats
    from scipy.special import xlogy

    c, a = s.conf, s.correct
    log_top = -(xlogy(a, c) + xlogy(1.0 - a, 1.0 - c))
    log_top = np.where(np.isfinite(log_top), log_top, 0.0)
    helpers = boot._helpers
    if "corp_atoms" not in helpers:
        atoms = _atoms(c, s.conf_order)
        boot.tick()                  # each of the two takes ~0.5 s at 2,000,000 rows
        helpers["corp_atoms"] = _atom_matrix(atoms, block.units, a, boot.device)
    mat = helpers["corp_atoms"]

    def build(lo: int, hi: int) -> np.ndarray:
        return np.stack([a[lo:hi], (c[lo:hi] - a[lo:hi]) ** 2, log_top[lo:hi]], 1)

    def build_refine(lo: int, hi: int) -> np.ndarray:
        return np.concatenate([refinement.coef[lo:hi].astype(np.float64),
                               np.stack([boot.nll_finite[lo:hi], boot.nll_inf[lo:hi].astype(np.float64),
                                         s.brier[lo:hi]], 1)], 1)

    # two products: the CORP sums must not depend on whether a run has logits (a top-label run has no
    # refinement), and float32 products of another width round differently
    sums = boot._sums(block, "corp", 3, build)
    n = block.totals
    cells = torch.sparse.mm(mat, block.counts.T.contiguous().to(mat.device)).double().cpu().numpy()   # (2V, R_b)
    v = cells.shape[0] // 2
    rb = len(block)
    s_r = np.empty((rb, 2))
    for r in range(rb):             # one isotonic fit per resample: a block of them took 1.4 s at 2 M rows
        boot.tick()
        s_r[r] = _pav_scores(cells[:v, r], cells[v:, r])
    acc = sums[:, 0] / n
    with np.errstate(divide="ignore", invalid="ignore"):
        unc_b = acc * (1.0 - acc)
        unc_l = -(xlogy(acc, acc) + xlogy(1.0 - acc, 1.0 - acc))
    out = {"corp_mcb": sums[:, 1] / n - s_r[:, 0], "corp_dsc": unc_b - s_r[:, 0], "corp_unc": unc_b}
    if k == 2:
        out.update(corp_mcb_log=sums[:, 2] / n - s_r[:, 1], corp_dsc_log=unc_l - s_r[:, 1], corp_unc_log=unc_l)
    if refinement is not None:
        ref = boot._sums(block, "refine", 11, build_refine)
        nll_ref, brier_ref = resampled(ref[:, :8], n, refinement.beta)
        inf = ref[:, 9] > 0.5
        nll = ref[:, 8] / n
        brier = ref[:, 10] / n
        out["nll_refinement"] = np.where(inf, np.inf, nll_ref)
        out["nll_calibration"] = np.where(inf, np.nan, np.maximum(nll - nll_ref, 0.0))
        out["brier_refinement"] = brier_ref
        out["brier_calibration"] = brier - brier_ref
    return out


def p_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int, n_resamples: int, seed: int) -> float:
    """The consistency-resampling p-value of the top-label ECE at ``n_bins`` equal-width bins (``n_resamples``
    redraws, seeded; at least 1 / (n_resamples + 1)); NaN for an empty sample or no redraws."""
    if conf.size == 0 or n_resamples < 1:
        return math.nan
    return float(sig.p_ece(conf, correct, int(n_bins), n_resamples=int(n_resamples), seed=int(seed))[1])


def skce_test(conf: np.ndarray, correct: np.ndarray, n_resamples: int, seed: int) -> dict:
    """{"p_skce", "p_skce_method" ("quadratic" or "linear"), "skce"} of the SKCE test of (N,) confidences and
    correctness (:func:`calibview.core.stats.corp.significance.skce`); NaN and "" below two samples or, for the
    quadratic estimator, without redraws."""
    if conf.size < 2 or (conf.size <= sig.QUADRATIC_MAX and n_resamples < 1):
        return {"p_skce": math.nan, "p_skce_method": "", "skce": math.nan}
    t = sig.skce(conf, correct, n_resamples=int(n_resamples), seed=int(seed))
    return {"p_skce": float(t.p), "p_skce_method": t.estimator, "skce": float(t.value)}
