"""Vector scaling ends at the optimum itself, not wherever L-BFGS's line search stopped resolving it: its
parameters make the NLL gradient vanish by an independent formula, and a fit that adds its sums in another order
(streamed from disk in chunks) lands on the same parameters to 1e-10."""

import numpy as np
import pytest
import torch

from calibview.core import calibrators as calib
from calibview.core.io import discovery, stream
from calibview.core.io.writer import write_run


def _data(n, k, seed, rare=0):
    """(N, K) float32 logits with ~n / k rows per class; the last ``rare`` classes get 3 rows each (pinned by
    VS's default min_count of 10)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k - rare, n)
    if rare:
        y[: 3 * rare] = np.repeat(np.arange(k - rare, k), 3)
    z = rng.normal(size=(n, k)) * 1.5
    z[np.arange(n), y] += rng.normal(2.5, 1.0, n)
    return (z * 1.7).astype(np.float32), y


def _numpy_gradient(z, y, w, b):
    """d mean NLL / d (w, b) of softmax(z * w + b) in float64 numpy, written out independently."""
    z = z.astype(np.float64)
    a = z * w + b
    a -= a.max(axis=1, keepdims=True)
    p = np.exp(a)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    return (p * z).mean(axis=0), p.mean(axis=0)


def test_vs_ends_where_the_gradient_vanishes():
    z, y = _data(6000, 200, seed=0)
    fitted = calib.fit("vs", torch.from_numpy(z), torch.from_numpy(y))
    p = fitted.params
    assert p["converged"] and p["pinned_classes"] == 0 and 1 <= p["newton_steps"] <= 3
    g_w, g_b = _numpy_gradient(z, y, np.array(p["w"]), np.array(p["b"]))
    # L-BFGS alone stops here at a largest entry of ~1e-7 (its line search compares objective values)
    assert np.abs(g_w).max() < 1e-12 and np.abs(g_b).max() < 1e-12


@pytest.mark.parametrize("options", [{}, {"prior": 20.0}], ids=["rare classes pinned", "with a prior"])
def test_vs_streamed_in_chunks_equals_the_loaded_fit(tmp_path, options):
    z, y = _data(5000, 300, seed=1, rare=25)
    path = tmp_path / "run.h5"
    write_run(path, "m", "d", "val", logits=z, labels=y)
    loaded = calib.fit("vs", torch.from_numpy(z), torch.from_numpy(y), options=options).params
    run = discovery.find_run(discovery.list_runs(path), "m/d")
    with stream.StreamedSplit(str(path), run, "val", chunk_rows=777) as split:
        streamed = calib.fit("vs", split, split.labels, options=options).params
    assert loaded["pinned_classes"] >= 25 and loaded["converged"] and streamed["converged"]
    for key in ("w", "b"):
        np.testing.assert_allclose(streamed[key], loaded[key], rtol=0, atol=1e-10)
    assert streamed["fit_nll"] == pytest.approx(loaded["fit_nll"], rel=1e-13)
