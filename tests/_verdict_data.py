"""A release whose deployment split is too small to decide the ECE criterion: 300 samples of a calibrated
three-class model, whose ECE (about 2.8 %) lies just under the default 3 % limit while its bootstrap interval
reaches well above it."""

from __future__ import annotations

import numpy as np

from calibview.core.io import writer

RUN = "net/small"
NAMES = ("a", "b", "c")
N_DEPLOY = 300


def calibrated(n: int, seed: int, scale: float = 8.0):
    """(logits (n, 3) float32, labels (n,)): labels drawn from the softmax of the logits, so the model is calibrated
    and any ECE measured is estimation error."""
    rng = np.random.default_rng(seed)
    z = scale * rng.normal(size=(n, 3))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return z.astype(np.float32), y.astype(np.int64)


def write_small(path) -> str:
    """``val`` (3000 samples, the fit split) and ``deploy`` (300 samples) of run net/small."""
    writer.write_splits(path, "net", "small", {"val": ("logits",) + calibrated(3000, 100),
                                               "deploy": ("logits",) + calibrated(N_DEPLOY, 0)},
                        class_names=NAMES)
    return str(path)
