"""Generated regression runs for the tests: a heteroscedastic Gaussian problem with a miscalibrated
predictive variance, written as var, quantile and sample runs."""

from __future__ import annotations

import h5py
import numpy as np
from scipy import stats

LEVELS = np.arange(1, 20) / 20.0


def hetero(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, var, targets) (N,): y = sin(x) + noise with sd 0.3 + 0.5|x|, predicted with 0.7 x that sd."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    sd = 0.3 + 0.5 * np.abs(x)
    y = np.sin(x) + rng.normal(0, sd)
    return np.sin(x) + 0.05, (0.7 * sd) ** 2, y


def write_runs(path, n_fit: int = 400, n_eval: int = 600, samples: int = 0) -> None:
    """gp/toy (var), qr/toy (quantiles at LEVELS) and, with ``samples`` > 0, mc/toy (samples) in ``path``."""
    rng = np.random.default_rng(7)
    with h5py.File(path, "a") as f:
        for split, n, seed in (("val", n_fit, 1), ("test", n_eval, 2)):
            mean, var, y = hetero(n, seed)
            g = f.create_group(f"gp/toy/{split}")
            g["mean"], g["targets"], g["var"] = mean, y, var
            g = f.create_group(f"qr/toy/{split}")
            g["mean"], g["targets"] = mean, y
            g["quantiles"] = mean[:, None] + np.sqrt(var)[:, None] * stats.norm.ppf(LEVELS)[None, :]
            g["quantiles"].attrs["levels"] = LEVELS
            if samples:
                g = f.create_group(f"mc/toy/{split}")
                g["mean"], g["targets"] = mean, y
                g["samples"] = mean[:, None] + np.sqrt(var)[:, None] * rng.standard_normal((n, samples))
