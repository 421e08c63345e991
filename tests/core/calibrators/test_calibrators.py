"""Temperature scaling against brute-force searches, and the calibrator interface (JSON round trip, errors)."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize_scalar

from calibview.core import calibrators as calib
from calibview.core.errors import Cancelled, CalibviewError


def _logits(n, k, seed, scale):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 1.5
    return torch.from_numpy(z * scale).float(), torch.from_numpy(y)


def _brute_force_temperature(z, y):
    """NLL minimised over T by bounded Brent on a fine bracket, with torch's cross_entropy in float64."""
    z64 = z.double()
    f = lambda t: float(F.cross_entropy(z64 / t, y))
    ts = np.exp(np.linspace(np.log(0.05), np.log(20), 400))
    t0 = ts[int(np.argmin([f(t) for t in ts]))]
    res = minimize_scalar(f, bounds=(t0 / 1.03, t0 * 1.03), method="bounded", options={"xatol": 1e-10})
    return res.x, res.fun


@pytest.mark.parametrize("scale", [0.3, 1.0, 4.0])      # under-confident, about right, over-confident
@pytest.mark.parametrize("n,k", [(3000, 10), (25000, 50)])
def test_temperature_matches_brute_force(n, k, scale):
    z, y = _logits(n, k, 0, scale)
    t_ref, nll_ref = _brute_force_temperature(z, y)
    fitted = calib.fit("ts", z, y)
    t = fitted.params["temperature"]
    assert t == pytest.approx(t_ref, rel=1e-6)
    nll = float(F.cross_entropy(z.double() / t, y))
    assert nll <= nll_ref + 1e-12          # converged: at least as good as the brute-force optimum


def test_temperature_on_real_cifar_logits_matches_brute_force_and_sources(demo_file):
    from calibview.core.io.logits import read_split
    d = read_split(demo_file, "resnet110-brier/cifar10", "val")
    z, y = torch.from_numpy(d.scores.copy()), torch.from_numpy(d.labels.copy())
    t = calib.fit("ts", z, y).params["temperature"]
    assert t == pytest.approx(_brute_force_temperature(z, y)[0], rel=1e-6)
    assert round(t, 3) == 1.171          # calibview/resources/DEMO_SOURCES.md: T ~ 1.171 when fitted by val NLL


def test_ts_keeps_argmax_and_outputs_normalised_log_probs():
    z, y = _logits(500, 7, 1, 2.0)
    fitted = calib.fit("ts", z, y)
    lp = fitted.apply(z)
    assert lp.dtype == torch.float64
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(500, dtype=torch.float64))
    assert torch.equal(lp.argmax(1), z.argmax(1))
    assert fitted.keeps_argmax


def test_ts_grid_picks_first_minimal_ece_temperature():
    z, y = _logits(4000, 10, 2, 3.0)
    fitted = calib.fit("ts-grid", z, y)
    t = fitted.params["temperature"]
    # independent: ECE by a plain loop for each grid T
    def ece(t):
        p = torch.softmax(z.double() / t, 1)
        c, pred = p.max(1)
        a = (pred == y).double()
        edges = np.linspace(0, 1, 16)
        e = 0.0
        for b in range(15):
            m = (c > edges[b]) & (c <= edges[b + 1]) if b else (c <= edges[1])
            if m.any():
                e += float(m.double().mean() * (a[m].mean() - c[m].mean()).abs())
        return e
    grid = [round(0.1 * i, 1) for i in range(1, 101)]
    values = [ece(g) for g in grid]
    assert t == grid[int(np.argmin(values))]


def test_json_round_trip_applies_identically(tmp_path):
    z, y = _logits(800, 5, 3, 2.0)
    fitted = calib.fit("ts", z, y, fit_info={"split": "val"})
    text = json.dumps(fitted.to_json())
    back = calib.from_json(text)
    assert back.method == "ts" and back.k == 5 and back.fit_info["split"] == "val"
    torch.testing.assert_close(back.apply(z), fitted.apply(z), rtol=0, atol=0)


def test_apply_to_wrong_number_of_classes_is_a_clear_error():
    z, y = _logits(100, 5, 4, 1.0)
    fitted = calib.fit("ts", z, y)
    with pytest.raises(CalibviewError, match="K = 5"):
        fitted.apply(torch.zeros(3, 6))


def test_unknown_calibrator_and_bad_json():
    with pytest.raises(CalibviewError, match="Unknown calibrator 'xx'"):
        calib.get("xx")
    with pytest.raises(CalibviewError, match="not a calibview calibrator"):
        calib.from_json({"foo": 1})


def test_fit_honours_cancel():
    import threading
    z, y = _logits(2000, 10, 5, 1.0)
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        calib.fit("ts", z, y, cancel=ev)


def test_separable_fit_split_warns_instead_of_diverging():
    # every sample correct with a margin: NLL keeps falling as T -> 0
    z = torch.tensor([[5.0, 0.0], [0.0, 5.0]] * 10)
    y = torch.tensor([0, 1] * 10)
    fitted = calib.fit("ts", z, y)
    assert fitted.params["temperature"] > 0
    assert any("separable" in w for w in fitted.warnings)


@pytest.mark.parametrize("method, options, fragments", [
    ("hb", {"binz": 5}, ["Histogram binning", "hb.binz", "bins (int)", "strategy"]),
    ("hb", {"bins": "abc"}, ["Histogram binning", "hb.bins = 'abc'", "an int", "bins (int), strategy"]),
    ("hb", {"strategy": "kmeans"}, ["uniform or quantile"]),
    ("ms", {"lam": "abc"}, ["Matrix scaling", "ms.lam = 'abc'", "float or 'auto'", "penalty", "max_iter (int)"]),
    ("dirichlet", {"max_iter": 1.5}, ["Dirichlet", "max_iter", "an int"]),
    ("platt", {"smooth_targets": "maybe"}, ["Platt", "smooth_targets", "a bool"]),
    ("ts", {"bins": 3}, ["Temperature scaling", "ts.bins", "takes no options"]),
])
def test_bad_options_name_the_calibrator_and_list_the_valid_keys(method, options, fragments):
    with pytest.raises(CalibviewError) as err:
        calib.configured(method, options)
    msg = str(err.value)
    assert all(f in msg for f in fragments), msg
    assert msg.count(". ") == 0 and msg.endswith("."), msg


def test_good_options_configure_the_method():
    assert calib.configured("hb", {"bins": 7, "strategy": "quantile"}).bins == 7
    assert calib.configured("ms", {"lam": "auto", "penalty": "l2"}).lam == "auto"
    assert calib.configured("dirichlet", {"lam": 1}).lam == 1.0
    assert calib.configured("platt", {"smooth_targets": True}).smooth_targets is True
    assert calib.option_types("hb") == {"bins": "int", "strategy": "str"}
    assert calib.option_types("ts") == {}
