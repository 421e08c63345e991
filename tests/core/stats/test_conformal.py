"""Conformal scores, quantile and sets (calibview.core.stats.conformal) against MAPIE, a brute force written here,
a hand-computed quantile and the coverage guarantee of randomised APS."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from mapie import classification as mapie_classification
from sklearn.base import BaseEstimator, ClassifierMixin

from calibview.core.errors import ParameterError
from calibview.core.evaluation import defaults
from calibview.core.stats import conformal as cf


def _model(n: int, k: int, seed: int, conc: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A calibrated synthetic model: probabilities from a Dirichlet, labels drawn from them."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, conc), size=n)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1).clip(0, k - 1)
    return p, y.astype(np.int64)


def _brute_scores(p: np.ndarray, score: str, lam=0.0, kreg=0, u=None) -> np.ndarray:
    """Every class's score by the definition, one row and class at a time."""
    n, k = p.shape
    out = np.empty((n, k))
    for i in range(n):
        for c in range(k):
            if score == "lac":
                out[i, c] = 1.0 - p[i, c]
                continue
            above = np.sort(p[i][p[i] > p[i, c]])[::-1]            # descending, as the prefix sums run
            tied = p[i][p[i] == p[i, c]]
            upto = math.fsum(np.concatenate([above, tied]))
            before = math.fsum(above)
            s = upto if u is None else before + u[i] * (upto - before)
            if score == "raps":
                s += lam * max(0, above.size + tied.size - kreg)
            out[i, c] = s
    return out


def _brute_quantile(scores: np.ndarray, alpha: float) -> float:
    n = scores.size
    i = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    return float("inf") if i > n else float(np.sort(scores)[i - 1])


# --- the quantile ------------------------------------------------------------------------------------------------

def test_the_quantile_index_on_a_hand_checked_case():
    # n = 8 scores 0.1 ... 0.8, alpha = 0.2: ceil(9 * 0.8) = ceil(7.2) = 8, the 8th smallest is 0.8
    s = np.arange(1, 9) / 10
    assert cf.quantile_index(8, 0.2) == 8
    assert cf.conformal_quantile(s, 0.2) == 0.8
    # np.quantile's "higher" at level 1 - alpha takes position ceil(0.8 * 7) = 6 (0-based): the 7th smallest
    assert np.quantile(s, 0.8, method="higher") == 0.7
    # alpha = 0.1: ceil(9 * 0.9) = 9 > 8, so qhat is +inf (the set of every class)
    assert cf.quantile_index(8, 0.1) == 9 and cf.conformal_quantile(s, 0.1) == math.inf
    assert cf.min_calibration(0.1) == 9 and cf.conformal_quantile(np.arange(9.0), 0.1) == 8.0
    # exact arithmetic: 20 * (1 - 0.05) is 19 exactly, not 19.000000000000004 rounded up to 20
    assert cf.quantile_index(19, 0.05) == 19 and cf.min_calibration(0.05) == 19


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), "x"])
def test_alpha_outside_the_open_interval_is_refused(alpha):
    with pytest.raises(ParameterError, match="alpha"):
        cf.check_alpha(alpha)


def test_group_quantiles_are_each_groups_own():
    rng = np.random.default_rng(3)
    s, g = rng.random(300), rng.integers(0, 3, 300)
    g[:5] = 3                                      # a group of 5: too small at alpha 0.1
    q, sizes = cf.group_quantiles(s, g, 5, 0.1)
    for j in range(3):
        assert q[j] == _brute_quantile(s[g == j], 0.1)
    assert q[3] == math.inf and q[4] == math.inf and sizes.tolist()[3:] == [5, 0]


def test_the_core_and_the_command_lines_defaults_agree():
    assert (cf.RAPS_LAMBDA, cf.RAPS_KREG) == (defaults.RAPS_LAMBDA, defaults.RAPS_KREG)
    assert cf.SCORES == defaults.CONFORMAL_SCORES


# --- the scores and sets against a brute force -------------------------------------------------------------------

def _with_ties(p: np.ndarray) -> np.ndarray:
    """Rows rounded to tenths and renormalised by a power of two, so tied classes stay exactly tied."""
    q = p.copy()
    q[:40] = np.round(q[:40], 1) + 0.05
    q[:40] /= q[:40].sum(axis=1, keepdims=True)
    return q


@pytest.mark.parametrize("score", ["aps", "raps"])
@pytest.mark.parametrize("randomized", [False, True])
def test_scores_sets_and_coverage_equal_a_brute_force(score, randomized):
    p, y = _model(300, 12, 1)
    p = _with_ties(p)
    u = np.random.default_rng(5).random(300) if randomized else None
    lam, kreg = 0.02, 3
    brute = _brute_scores(p, score, lam, kreg, u)
    mine = cf.class_scores(p, score, lam=lam, kreg=kreg, u=u)
    np.testing.assert_allclose(mine, brute, rtol=0, atol=1e-12)
    t = cf.true_scores(p, y, score, lam=lam, kreg=kreg, u=u, width=3)        # small window: the fallback too
    assert np.array_equal(t, mine[np.arange(300), y])
    # from a full ranking of the values alone, the label's entry is computed by itself: the same bits
    values_only = cf.rank(p, with_classes=False)
    assert values_only.tied.size > 0
    assert np.array_equal(cf.true_scores(p, y, score, lam=lam, kreg=kreg, u=u, ranked=values_only), t)
    q = cf.conformal_quantile(t[:150], 0.1)
    assert q == _brute_quantile(t[:150], 0.1)
    sets = cf.prediction_sets(p[150:], score, qhat=q, lam=lam, kreg=kreg, u=None if u is None else u[150:])
    far = np.abs(brute[150:] - q) > 1e-12            # the brute force sums in another order
    assert np.array_equal(sets[far], (brute[150:] <= q)[far])
    assert np.array_equal(sets, mine[150:] <= q)
    sizes, covered = cf.set_stats(p[150:], y[150:], score, qhat=q, lam=lam, kreg=kreg,
                                  u=None if u is None else u[150:], width=3)
    assert np.array_equal(sizes, sets.sum(axis=1))
    assert np.array_equal(covered, sets[np.arange(150), y[150:]])
    # tied classes share a score, so they are in or out of a set together
    for i in np.flatnonzero(sets.any(axis=1))[:20]:
        probs_in = p[150 + i][sets[i]]
        assert not np.isin(p[150 + i][~sets[i]], probs_in).any()


def test_class_conditional_thresholds_equal_a_brute_force():
    p, y = _model(400, 8, 2)
    cq = np.random.default_rng(1).uniform(0.5, 1.0, 8)
    for score in cf.SCORES:
        brute = _brute_scores(p, score, 0.01, 2) if score != "lac" else 1 - p
        sizes, covered = cf.set_stats(p, y, score, class_qhat=cq, lam=0.01, kreg=2, width=2)
        inset = brute <= cq[None, :]
        assert np.array_equal(sizes, inset.sum(axis=1))
        assert np.array_equal(covered, inset[np.arange(400), y])


# --- MAPIE, where the conventions match --------------------------------------------------------------------------



class _Stored(ClassifierMixin, BaseEstimator):
    """A prefit classifier whose features are its probabilities: MAPIE sees exactly our probabilities."""

    def __init__(self, k: int = 2):
        self.k = k

    def fit(self, X, y=None):
        self.classes_ = np.arange(self.k)
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=np.float64)

    def predict(self, X):
        return np.asarray(X).argmax(axis=1)


def _mapie(score: str, p_cal, y_cal, alpha):
    k = p_cal.shape[1]
    m = mapie_classification.SplitConformalClassifier(_Stored(k).fit(p_cal[:1]), confidence_level=1 - alpha,
                                                      conformity_score=score, prefit=True, random_state=0)
    return m.conformalize(p_cal, y_cal)


@pytest.mark.parametrize("alpha", [0.1, 0.05, 0.2])
def test_lac_quantile_sets_and_coverage_equal_mapies(alpha):
    p, y = _model(3000, 10, 7, conc=0.8)
    pc, yc, pe, ye = p[:1000], y[:1000], p[1000:], y[1000:]
    m = _mapie("lac", pc, yc, alpha)
    _, theirs = m.predict_set(pe)
    q = cf.conformal_quantile(cf.true_scores(pc, yc, "lac"), alpha)
    assert q == float(m._mapie_classifier.conformity_score_function_.quantiles_[0])
    # MAPIE includes a class within 1e-8 above qhat; no score lies that close here, so the sets are the same
    assert np.abs((1 - pe) - q).min() > 1e-8
    mine = cf.prediction_sets(pe, "lac", qhat=q)
    assert np.array_equal(mine, theirs[:, :, 0])
    _, covered = cf.set_stats(pe, ye, "lac", qhat=q)
    assert covered.mean() == theirs[np.arange(2000), ye, 0].mean()


@pytest.mark.parametrize("alpha", [0.1, 0.05])
def test_non_randomised_aps_equals_mapies_where_the_conventions_match(alpha):
    from mapie.conformity_scores import APSConformityScore

    p, y = _model(3000, 10, 8, conc=0.8)
    peaked = np.full((20, 10), 0.001 / 9)
    peaked[:, 3] = 0.999                          # the top class alone scores above qhat: our set is empty
    p[-20:], y[-20:] = peaked, 3
    pc, yc, pe, ye = p[:1000], y[:1000], p[1000:], y[1000:]
    # MAPIE's APS calibration scores always subtract u * p_true (randomised); its cumulative mass up to and
    # including the label is the non-randomised score, ours to the bit
    theirs_cal, _ = APSConformityScore.get_true_label_cumsum_proba(yc, pc, np.arange(10))
    mine_cal = cf.true_scores(pc, yc, "aps")
    assert np.array_equal(mine_cal, theirs_cal[:, 0])
    m = _mapie("aps", pc, yc, alpha)
    m._mapie_classifier.conformity_scores_ = theirs_cal         # the non-randomised scores, in MAPIE's place
    _, theirs = m.predict_set(pe, conformity_score_params={"include_last_label": False})
    theirs = theirs[:, :, 0]
    q = cf.conformal_quantile(mine_cal, alpha)
    assert q == float(m._mapie_classifier.conformity_score_function_.quantiles_[0])
    mine = cf.prediction_sets(pe, "aps", qhat=q)
    # MAPIE never returns an empty set (it keeps the top class); ours is empty when the top class alone scores
    # above qhat. Everywhere else the sets are the same.
    nonempty = mine.any(axis=1)
    assert (~nonempty).any() and (theirs[~nonempty].sum(axis=1) == 1).all()
    assert np.array_equal(mine[nonempty], theirs[nonempty])
    _, covered = cf.set_stats(pe, ye, "aps", qhat=q)
    assert np.array_equal(covered[nonempty], theirs[np.arange(2000), ye][nonempty])


# --- randomised APS: exact coverage ------------------------------------------------------------------------------

def test_randomised_aps_covers_at_its_nominal_rate_over_200_seeded_repetitions():
    # With continuous scores, randomised APS covers a fresh sample with probability exactly
    # ceil((n + 1)(1 - alpha)) / (n + 1) (Romano et al. 2020): one test sample per repetition, so the 200
    # indicators are independent Bernoulli draws of that probability.
    n, alpha, reps = 199, 0.1, 200
    hits = 0
    for rep in range(reps):
        p, y = _model(n + 1, 10, 1000 + rep)
        u = cf.uniforms(rep, n + 1, 0)
        t = cf.true_scores(p[:n], y[:n], "aps", u=u[:n])
        q = cf.conformal_quantile(t, alpha)
        _, covered = cf.set_stats(p[n:], y[n:], "aps", qhat=q, u=u[n:])
        hits += int(covered[0])
    rate = cf.quantile_index(n, alpha) / (n + 1)
    lo, hi = stats.binom.interval(0.999, reps, rate)
    assert lo <= hits <= hi
    # the same seeds give the same sets
    assert np.array_equal(cf.uniforms(3, 10, 1), cf.uniforms(3, 10, 1))
    assert not np.array_equal(cf.uniforms(3, 10, 0), cf.uniforms(3, 10, 1))
