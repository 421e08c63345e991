"""Vector scaling, matrix scaling and Dirichlet calibration: optimality against an independent reference fit,
exact special cases, JSON round trips, chunking, degenerate fit splits, warnings, errors and cancel."""

import json
import math
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize

import calibview.core.calibrators.scaling as cs
from calibview.core import calibrators as calib
from calibview.core.errors import CalibviewError, Cancelled

METHODS = ("vs", "ms", "dirichlet")
LOG_TINY = math.log(np.finfo(np.float64).tiny)


def _logits(n, k, seed, scale=2.0, bump=1.5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += bump
    return torch.from_numpy(z * scale).float(), torch.from_numpy(y)


@pytest.fixture(scope="module")
def cifar(demo_file):
    from calibview.core.io.logits import read_split
    d = read_split(demo_file, "resnet110-brier/cifar10", "val")
    return torch.from_numpy(d.scores.copy()), torch.from_numpy(d.labels.copy())


# --- an independent reference: plain parameters, autograd, scipy's exact Newton -------------------------------------

def _ref_objective(method, z, y, w, b, penalty="odir", lam=1e-3, mu=1e-3):
    """Mean NLL (+ penalty) of the method's model with parameters (w or W, b), written from the definitions."""
    x = z.double()
    if method == "dirichlet":
        x = torch.log_softmax(x, dim=1).clamp_min(LOG_TINY)
    logits = x * w + b if method == "vs" else x @ w.T + b
    nll = F.cross_entropy(logits, y)
    if method == "vs":
        return nll, nll
    k = b.shape[0]
    d = w - torch.eye(k, dtype=torch.float64)
    if penalty == "odir":
        off = ~torch.eye(k, dtype=torch.bool)
        pen = lam * d[off].pow(2).mean() + mu * b.pow(2).mean()
        for c in set(range(k)) - set(y.tolist()):       # classes absent from the fit split
            pen = pen + lam / k * (w[c, c] - (w[:, c].sum() - w[c, c]) / (k - 1) - 1) ** 2
    else:
        pen = lam * d.pow(2).mean() + mu * b.pow(2).mean()
    return nll + pen, nll


def _reference_fit(method, z, y, **pen):
    """The minimum of :func:`_ref_objective` by exact Newton (scipy's trust-exact, gradient and Hessian by
    autograd) on the plain parameters, started at the identity: convex, so this is the optimum to ~1e-14."""
    k = z.shape[1]
    shape = (k,) if method == "vs" else (k, k)
    size = int(np.prod(shape))

    def f_t(t):
        return _ref_objective(method, z, y, t[:size].view(shape), t[size:], **pen)[0]

    def fun(theta):
        t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
        f = f_t(t)
        f.backward()
        return float(f.detach()), t.grad.numpy().copy()

    def hess(theta):
        t = torch.tensor(theta, dtype=torch.float64)
        return torch.autograd.functional.hessian(f_t, t, vectorize=True).numpy()

    x0 = np.concatenate([np.ones(k) if method == "vs" else np.eye(k).ravel(), np.zeros(k)])
    res = minimize(fun, x0, jac=True, hess=hess, method="trust-exact", options={"gtol": 1e-12, "maxiter": 500})
    assert np.abs(res.jac).max() < 1e-7            # the reference itself converged
    return res.fun


def _pen(fitted):
    """The penalty strengths the fit used (matrix methods choose them on a held-out fifth by default)."""
    p = fitted.params
    return {"lam": p["lam"], "mu": p["mu"]} if "lam" in p else {}


def _ours(method, fitted, z, y, **pen):
    a = torch.tensor(fitted.params["W" if method != "vs" else "w"], dtype=torch.float64)
    b = torch.tensor(fitted.params["b"], dtype=torch.float64)
    f, nll = _ref_objective(method, z, y, a, b, **pen)
    return float(f), float(nll)


@pytest.mark.parametrize("method", METHODS)
def test_fit_at_least_as_good_as_reference_on_random_data(method):
    z, y = _logits(3000, 10, 0)
    fitted = calib.fit(method, z, y)
    f, nll = _ours(method, fitted, z, y, **_pen(fitted))
    assert f <= _reference_fit(method, z, y, **_pen(fitted)) + 1e-6
    assert fitted.params["fit_nll"] == pytest.approx(nll, rel=1e-9)
    assert fitted.params["converged"] and fitted.warnings == ()
    assert nll < float(F.cross_entropy(z.double(), y))     # it did calibrate: better than the identity


@pytest.mark.parametrize("method", METHODS)
def test_fit_at_least_as_good_as_reference_on_cifar(method, cifar):
    z, y = cifar
    fitted = calib.fit(method, z, y)
    f, _ = _ours(method, fitted, z, y, **_pen(fitted))
    assert f <= _reference_fit(method, z, y, **_pen(fitted)) + 1e-6


@pytest.mark.parametrize("method", ["ms", "dirichlet"])
def test_absent_class_objective_matches_reference_and_parameters_are_canonical(method):
    z, y = _logits(3000, 10, 0)
    keep = (y != 3) & (y != 7)
    z, y = z[keep], y[keep]
    fitted = calib.fit(method, z, y)
    f, _ = _ours(method, fitted, z, y, **_pen(fitted))
    assert f <= _reference_fit(method, z, y, **_pen(fitted)) + 1e-6
    w = np.array(fitted.params["W"])
    off = w - np.diag(np.diag(w))
    np.testing.assert_allclose(off.sum(axis=0), 0, atol=1e-12)       # the penalty-minimising representative
    assert abs(sum(fitted.params["b"])) < 1e-12


@pytest.mark.parametrize("cls", [cs.MatrixScaling, cs.Dirichlet])
def test_l2_penalty_option_matches_reference(cls):
    z, y = _logits(3000, 10, 5, scale=1.0)
    pen = {"penalty": "l2", "lam": 0.5, "mu": 0.1}
    m = cls(**pen)
    params, _ = m.fit(z, y)
    assert (params["penalty"], params["lam"], params["mu"]) == ("l2", 0.5, 0.1)
    fitted = calib.Fitted(method=m.name, k=10, params=params)
    f, _ = _ours(m.name, fitted, z, y, **pen)
    assert f <= _reference_fit(m.name, z, y, **pen) + 1e-6
    # the stronger L2 pull towards W = I must make a different fit from the default ODIR one
    default = calib.fit(m.name, z, y)
    assert not np.allclose(params["W"], default.params["W"], atol=1e-3)


# --- exact special cases, JSON, chunks ------------------------------------------------------------------------

def test_vs_at_its_start_is_the_identity():
    z, _ = _logits(500, 7, 1)
    f = calib.Fitted(method="vs", k=7, params={"w": [1.0] * 7, "b": [0.0] * 7})
    assert torch.equal(f.apply(z), torch.log_softmax(z.double(), dim=1))


@pytest.mark.parametrize("method", ["ms", "dirichlet"])
def test_diagonal_matrix_equals_temperature_scaling(method):
    z, _ = _logits(800, 6, 2)
    t = 1.7
    f = calib.Fitted(method=method, k=6, params={"W": (np.eye(6) / t).tolist(), "b": [0.0] * 6})
    ts = calib.Fitted(method="ts", k=6, params={"temperature": t})
    torch.testing.assert_close(f.apply(z), ts.apply(z), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_json_round_trip_and_chunked_apply(method):
    z, y = _logits(2000, 8, 3)
    zt, _ = _logits(10_000, 8, 4)
    fitted = calib.fit(method, z, y)
    back = calib.from_json(json.dumps(fitted.to_json()))
    whole = fitted.apply(zt)
    assert torch.equal(back.apply(zt), whole)
    a = torch.tensor(fitted.params["W" if method != "vs" else "w"], dtype=torch.float64)
    b = torch.tensor(fitted.params["b"], dtype=torch.float64)
    x = zt.double() if method != "dirichlet" else torch.log_softmax(zt.double(), dim=1)
    torch.testing.assert_close(whole, torch.log_softmax(x * a + b if method == "vs" else x @ a.T + b, dim=1),
                               rtol=0, atol=1e-12)
    assert back.warnings == fitted.warnings and back.params == fitted.to_json()["params"]
    chunked = torch.cat([fitted.apply(zt[i:i + 4096]) for i in range(0, zt.shape[0], 4096)])
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-12)
    odd = torch.cat([fitted.apply(zt[i:i + 7]) for i in range(0, 700, 7)])
    torch.testing.assert_close(odd, whole[:700], rtol=0, atol=1e-12)
    assert whole.dtype == torch.float64
    torch.testing.assert_close(whole.exp().sum(1), torch.ones(10_000, dtype=torch.float64))


def test_registered_and_not_argmax_preserving():
    for method in METHODS:
        assert method in calib.available()
        assert calib.get(method).keeps_argmax is False


# --- degenerate fit splits --------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_class_absent_from_fit_split_stays_finite(method):
    z, y = _logits(3000, 10, 0)
    keep = y != 3
    fitted = calib.fit(method, z[keep], y[keep])
    zt, yt = _logits(3000, 10, 1)
    lp = fitted.apply(zt)
    assert torch.isfinite(lp).all()
    assert (lp[:, 3] > -1000).all()                     # class 3 keeps a (small) probability
    assert any("do not occur in the fit split" in w for w in fitted.warnings)
    for key in ("b", "W", "w"):
        if key in fitted.params:
            assert np.isfinite(fitted.params[key]).all()
    if method != "vs":                                  # the penalty keeps its probability within reason
        assert float(lp[yt == 3, 3].exp().mean()) > 1e-8


@pytest.mark.parametrize("method", METHODS)
def test_separable_fit_split_stops_with_finite_parameters_and_warns(method):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(500, 5, generator=g, dtype=torch.float64)
    y = z.argmax(dim=1)                                 # every prediction correct
    fitted = calib.fit(method, z, y)
    for key in ("b", "W", "w"):
        if key in fitted.params:
            assert np.isfinite(fitted.params[key]).all()
    assert any("separable" in w for w in fitted.warnings)
    assert torch.isfinite(fitted.apply(torch.randn(100, 5, generator=g))).all()


@pytest.mark.parametrize("method", METHODS)
def test_single_sample_fits_and_warns(method):
    z, y = _logits(1, 10, 0)
    fitted = calib.fit(method, z, y)
    assert any("single sample" in w for w in fitted.warnings)
    assert torch.isfinite(fitted.apply(_logits(50, 10, 1)[0])).all()


@pytest.mark.parametrize("method", METHODS)
def test_binary_with_identical_rows_gives_the_base_rate(method):
    z = torch.tensor([[0.3, 0.1]]).repeat(1000, 1)
    y = (torch.arange(1000) % 4 == 0).long()            # class 1 in a quarter of the rows
    fitted = calib.fit(method, z, y)
    p = fitted.apply(z[:3]).exp()
    torch.testing.assert_close(p[:, 1], torch.full((3,), 0.25, dtype=torch.float64), rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_log_probabilities_with_exact_zeros(method):
    z, y = _logits(2000, 6, 7, scale=8.0)
    p = torch.softmax(z.double(), dim=1)
    p[p < 1e-6] = 0.0                                   # a probabilities file with exact zeros
    lp_in = torch.log(p / p.sum(1, keepdim=True))
    assert torch.isneginf(lp_in).any()
    fitted = calib.fit(method, lp_in, y)
    out = fitted.apply(lp_in)
    assert torch.isfinite(out).all() and np.isfinite(fitted.params["fit_nll"])


@pytest.mark.parametrize("method", METHODS)
def test_fit_inside_inference_mode_and_float64_input_untouched(method):
    z, y = _logits(1000, 5, 8)
    z = z.double()
    before = z.clone()
    with torch.inference_mode():
        fitted = calib.fit(method, z, y)
        out = fitted.apply(z)
    assert torch.equal(z, before)
    torch.testing.assert_close(out, calib.fit(method, z, y).apply(z), rtol=0, atol=1e-12)


# --- warnings, errors, options, cancel, progress ------------------------------------------------------------------

@pytest.mark.parametrize("method", ["ms", "dirichlet"])
def test_ill_posed_warning(method):
    z, y = _logits(500, 10, 0)                          # 110 parameters on 500 samples
    warned = calib.fit(method, z, y).warnings
    assert any("110 parameters on only 500 samples" in w and "overfit" in w for w in warned)
    z, y = _logits(1100, 10, 0)
    assert not any("overfit" in w for w in calib.fit(method, z, y).warnings)


@pytest.mark.parametrize("method", ["ms", "dirichlet"])
def test_refuses_more_than_25_million_matrix_parameters(method):
    z = torch.zeros(3, 5001)
    with pytest.raises(CalibviewError, match="vector or temperature scaling"):
        calib.fit(method, z, torch.tensor([0, 1, 2]))


def test_options_are_validated():
    with pytest.raises(CalibviewError, match="penalty"):
        cs.MatrixScaling(penalty="l1")
    with pytest.raises(CalibviewError, match=">= 0"):
        cs.Dirichlet(lam=-1.0)
    with pytest.raises(CalibviewError, match="no penalty"):
        cs.VectorScaling(penalty="odir")
    with pytest.raises(CalibviewError, match="empty"):
        calib.fit("vs", torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))
    with pytest.raises(CalibviewError, match="malformed|inconsistent"):
        calib.Fitted(method="ms", k=3, params={"W": [[1.0, 0.0]], "b": [0.0] * 3}).apply(torch.zeros(2, 3))


@pytest.mark.parametrize("method", METHODS)
def test_cancel_before_fit(method):
    z, y = _logits(1000, 5, 0)
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        calib.fit(method, z, y, cancel=ev)


@pytest.mark.parametrize("method", METHODS)
def test_cancel_during_fit_stops_promptly_and_progress_is_monotone(method):
    z, y = _logits(3000, 10, 0)
    seen = []
    ev = threading.Event()

    def progress(frac, msg):
        seen.append(frac)
        if len(seen) == 3:
            ev.set()

    with pytest.raises(Cancelled):
        calib.fit(method, z, y, progress=progress, cancel=ev)
    assert len(seen) == 3                               # nothing ran after the cancel
    seen.clear()
    calib.fit(method, z, y, progress=lambda f, m: seen.append(f))
    assert seen == sorted(seen) and 0 <= seen[0] and seen[-1] == 1.0


def test_vs_overfit_warning_counts_only_the_free_parameters():
    z, y = _logits(300, 200, 0)                          # every class has < 10 rows: all pinned, nothing free
    warned = calib.fit("vs", z, y).warnings
    assert not any("overfit" in w for w in warned)
    assert any("keeps the temperature-scaling map" in w for w in warned)
    z, y = _logits(150, 10, 0)                           # ~15 rows a class; one class has < 10 and is pinned
    warned = calib.fit("vs", z, y).warnings
    assert any("18 parameters on only 150 samples" in w and "prefer temperature scaling" in w for w in warned)
