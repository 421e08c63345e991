"""Small generated logits files for the release, check and drift tests (K = 3, a few hundred rows per split)."""

from __future__ import annotations

import numpy as np

from calibview.core.io import writer

RUN = "net/toy"
NAMES = ("cat", "dog", "fox")


def toy_logits(n: int, seed: int, *, scale: float = 1.8, prior=(1 / 3, 1 / 3, 1 / 3), dtype=np.float32):
    """(logits (n, 3), labels (n,)): an over-confident classifier (logits ``scale`` times the calibrated ones)."""
    rng = np.random.default_rng(seed)
    y = rng.choice(3, size=n, p=np.asarray(prior) / np.sum(prior))
    z = rng.normal(size=(n, 3)) + 1.6 * np.eye(3)[y]
    return (scale * z).astype(dtype), y.astype(np.int64)


def write_toy(path, *, n: int = 600, shadow_scale: float = 3.5, k: int = 3, val_seed: int = 1) -> str:
    """val, deploy (label-shifted) and shadow (more over-confident: drift) splits of run net/toy."""
    splits = {"val": ("logits",) + toy_logits(n, val_seed),
              "deploy": ("logits",) + toy_logits(n, 2, prior=(0.6, 0.25, 0.15)),
              "shadow": ("logits",) + toy_logits(n, 3, scale=shadow_scale)}
    names = NAMES
    if k != 3:           # another class count under the same run name
        splits = {s: ("logits", np.pad(z, ((0, 0), (0, k - 3))), y) for s, (_, z, y) in splits.items()}
        names = NAMES + tuple(f"c{i}" for i in range(3, k))
    meta = {s: {"region": np.where(np.arange(len(y)) % 3 == 0, "north", "south")} for s, (_, _, y) in splits.items()}
    writer.write_splits(path, "net", "toy", splits, class_names=names, meta=meta)
    return str(path)


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ece_direct(p: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    """Top-label ECE with equal-width bins lo < conf <= hi, by a plain loop (independent of calibview)."""
    conf, pred = p.max(axis=1), p.argmax(axis=1)
    correct = (pred == y).astype(float)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for b in range(bins):
        m = (conf > edges[b]) & (conf <= edges[b + 1]) if b else (conf <= edges[1])
        if m.any():
            total += m.sum() / len(conf) * abs(conf[m].mean() - correct[m].mean())
    return total
