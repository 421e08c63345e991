"""Calibrators at large K: vector scaling stays well posed when most classes are absent from the fit split, and
every fit chunks the rows of an (N, K) matrix by metrics.chunk_rows(K)."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import logsumexp

from calibview.core import calibrators as calib
from calibview.core.stats.metrics import chunk_rows


def _many_absent(n=2000, k=5000, present=40, seed=0):
    """Logits of K classes with labels drawn from only ``present`` of them (~n / present rows each)."""
    rng = np.random.default_rng(seed)
    classes = np.sort(rng.choice(k, present, replace=False))
    y = classes[rng.integers(0, present, n)]
    z = rng.standard_normal((n, k)).astype(np.float32)
    z[np.arange(n), y] += 2.0 * rng.standard_normal(n).astype(np.float32) + 3.0
    z *= 2.0
    return torch.from_numpy(z), torch.from_numpy(y), classes


def _reference_nll(z, y, classes, w0):
    """The same well-posed objective written independently: the classes in ``classes`` have free (w, b) with the
    b centred to mean 0, every other class keeps the logit w0 * z; minimised by scipy's L-BFGS-B to tight
    tolerance. The pinned classes' part of each row's log-sum-exp is a constant, computed once."""
    z = z.numpy().astype(np.float64)
    y = y.numpy()
    n, k = z.shape
    pinned = np.ones(k, bool)
    pinned[classes] = False
    lse_pinned = logsumexp(w0 * z[:, pinned], axis=1)
    zf = z[:, classes]
    col = np.searchsorted(classes, y)
    p = len(classes)

    def fun(theta):
        w, b = theta[:p], theta[p:] - theta[p:].mean()
        a = zf * w + b
        lse = np.logaddexp(logsumexp(a, axis=1), lse_pinned)
        nll = np.mean(lse - a[np.arange(n), col])
        q = np.exp(a - lse[:, None])
        q[np.arange(n), col] -= 1.0
        gw, gb = (q * zf).sum(0) / n, q.sum(0) / n
        return nll, np.concatenate([gw, gb - gb.mean()])

    x0 = np.concatenate([np.full(p, w0), np.zeros(p)])
    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    return res.fun


def test_vs_with_most_classes_absent_pins_them_and_matches_an_independent_reference():
    z, y, classes = _many_absent(n=2000, k=500, present=40)
    k = z.shape[1]
    fitted = calib.fit("vs", z, y)
    p = fitted.params
    # converged by the stopping rule (147 iterations here: pinning makes it well posed, not well conditioned)
    assert p["converged"] and p["iterations"] <= 250
    assert p["absent"] == "ts" and p["pinned_classes"] == k - len(classes)
    t = calib.fit("ts", z, y).params["temperature"]
    pinned = np.ones(k, bool)
    pinned[classes] = False
    w, b = np.array(p["w"]), np.array(p["b"])
    assert np.all(w[pinned] == 1.0 / t) and np.all(b[pinned] == 0.0)   # the temperature-scaling map, exactly
    assert abs(b[classes].mean()) < 1e-12
    assert any("do not occur in the fit split" in m and "temperature-scaling map" in m for m in fitted.warnings)
    ref = _reference_nll(z, y, classes, 1.0 / t)
    assert p["fit_nll"] == pytest.approx(ref, abs=1e-5)
    assert p["fit_nll"] <= ref + 1e-7
    # the fitted map as applied gives the reported NLL
    lp = fitted.apply(z)
    assert float(-lp.gather(1, y[:, None]).mean()) == pytest.approx(p["fit_nll"], rel=1e-9)


def test_vs_identity_option_pins_absent_classes_at_w_1():
    z, y, classes = _many_absent(n=600, k=400, present=10, seed=1)
    fitted = calib.fit("vs", z, y, options={"absent": "identity"})
    w, b = np.array(fitted.params["w"]), np.array(fitted.params["b"])
    pinned = np.setdiff1d(np.arange(400), classes)
    assert np.all(w[pinned] == 1.0) and np.all(b[pinned] == 0.0)
    assert fitted.params["fit_nll"] == pytest.approx(_reference_nll(z, y, classes, 1.0), abs=1e-5)


def test_vs_with_too_few_rows_for_every_class_is_temperature_scaling():
    rng = np.random.default_rng(3)
    k = 3000
    y = rng.integers(0, k, 1000)                            # at most a handful of rows per class
    z = rng.standard_normal((1000, k)).astype(np.float32)
    z[np.arange(1000), y] += 4.0
    z, y = torch.from_numpy(z), torch.from_numpy(y)
    fitted = calib.fit("vs", z, y)
    t = calib.fit("ts", z, y).params["temperature"]
    assert fitted.params["iterations"] == 0 and fitted.params["pinned_classes"] == k
    torch.testing.assert_close(fitted.apply(z), calib.fit("ts", z, y).apply(z), rtol=0, atol=1e-12)
    assert np.all(np.array(fitted.params["w"]) == 1.0 / t)


def test_vs_with_every_class_pinned_reports_the_nll_of_the_temperature_map():
    """Every class pinned: no moments, no L-BFGS, one pass for the NLL of softmax(z / T), here against numpy's."""
    rng = np.random.default_rng(4)
    k, n = 2000, 800
    y = rng.integers(0, k, n)
    z = rng.standard_normal((n, k)).astype(np.float32) * 2
    z[np.arange(n), y] += 5.0
    fitted = calib.fit("vs", torch.from_numpy(z), torch.from_numpy(y))
    t = calib.fit("ts", torch.from_numpy(z), torch.from_numpy(y)).params["temperature"]
    a = z.astype(np.float64) / t
    ref = float(np.mean(logsumexp(a, axis=1) - a[np.arange(n), y]))
    assert fitted.params["pinned_classes"] == k and fitted.params["fit_nll"] == pytest.approx(ref, rel=1e-13)


def test_the_scaling_family_reuses_the_temperature_just_fitted_on_the_same_split(monkeypatch):
    """vs starts from (and pins rare classes at) ts's T: on the same fit split T is not fitted twice, and a split
    changed in place is fitted again."""
    from calibview.core.calibrators import temperature

    calls = []
    real = temperature._fit_temperature
    monkeypatch.setattr(temperature, "_fit_temperature", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    z, y, classes = _many_absent(n=600, k=300, present=20, seed=2)
    pinned = np.setdiff1d(np.arange(300), classes)
    t = calib.fit("ts", z, y).params["temperature"]
    w = np.array(calib.fit("vs", z, y).params["w"])
    assert len(calls) == 1 and np.all(w[pinned] == 1.0 / t)
    z.mul_(2.0)                                         # the same tensor, another fit split
    w2 = np.array(calib.fit("vs", z, y).params["w"])
    assert len(calls) == 2
    t2 = calib.fit("ts", z, y).params["temperature"]
    assert len(calls) == 2 and t2 == pytest.approx(2 * t, rel=1e-6) and np.all(w2[pinned] == 1.0 / t2)
    temperature.forget_last_fit()                       # what a benchmark timing repeated fits calls
    assert calib.fit_temperature(z, y)[0] == t2 and len(calls) == 3


def test_vs_on_a_well_posed_fit_split_is_unchanged():
    """Every class has hundreds of rows: the default VS is the unpenalised fit, as before the absent-class rule
    (numbers from the previous version, commit 20a153c, whose L-BFGS stopped with a largest gradient entry of
    3.7e-7, so 4e-6 from the optimum the Newton steps now reach; see test_vs_newton.py)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 3000)
    z = rng.normal(size=(3000, 10))
    z[np.arange(3000), y] += 1.5
    z, y = torch.from_numpy(z * 2.0).float(), torch.from_numpy(y)
    p = calib.fit("vs", z, y).params
    assert p["pinned_classes"] == 0
    np.testing.assert_allclose(p["w"], [0.738900268, 0.767746811, 0.760389342, 0.7470752, 0.755396679,
                                        0.748091784, 0.728776914, 0.746884313, 0.732403067, 0.710010246],
                               rtol=0, atol=1e-5)
    np.testing.assert_allclose(p["b"], [-0.072087554, -0.028698984, -0.068815181, -0.073708062, -0.140704491,
                                        0.131847622, 0.056867176, -0.05328178, 0.118477093, 0.128894793],
                               rtol=0, atol=1e-5)
    assert p["fit_nll"] == pytest.approx(1.450871006818496, abs=1e-9)


# --- the chunk rule --------------------------------------------------------------------------------------------

class _Spy(torch.Tensor):
    """A tensor that records how many rows each row slice of the whole fit split takes."""

    rows_seen: list = []
    n_rows = 0

    def __getitem__(self, key):
        out = super().__getitem__(key)
        k0 = key[0] if isinstance(key, tuple) else key
        if isinstance(k0, slice) and self.ndim == 2 and self.shape[0] == _Spy.n_rows:
            _Spy.rows_seen.append(out.shape[0])
        return out


@pytest.mark.parametrize("method", ["ts", "vs", "hb", "mrr"])
def test_fits_chunk_rows_by_the_byte_budget(method):
    n, k = 300, 20_000                                      # chunk_rows(20,000) = 104 rows, not 4,096
    rng = np.random.default_rng(0)
    y = torch.from_numpy(rng.integers(0, 5, n))
    z = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32)).as_subclass(_Spy)
    _Spy.rows_seen, _Spy.n_rows = [], n
    calib.fit(method, z, y, options={"min_count": n} if method == "vs" else None)   # vs: passes, no L-BFGS
    assert _Spy.rows_seen, "the fit did not chunk the rows at all"
    assert max(_Spy.rows_seen) <= chunk_rows(k) == 104
