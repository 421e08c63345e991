"""A file holding the same toy classifier twice: ``logit/toy`` (its logits) and ``top/toy`` (the top-label
confidence, prediction and label read off those logits), so a test can compare the two forms of one model."""

from __future__ import annotations

import numpy as np

from calibview.core.io.toplabel.write import from_scores, write_toplabel
from calibview.core.io.writer import write_run


def write_mixed(path, *, seed: int, k: int, sizes: dict, shift: float, scale: float = 1.0) -> dict:
    """Write both runs to ``path`` (splits ``sizes`` {name: N}, K = ``k``: normal logits times ``scale`` with the
    label's logit raised by ``shift``); returns {split: (confidence, predictions, labels)} of ``top/toy``."""
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in sizes.items():
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k)) * scale
        z[np.arange(n), y] += shift
        write_run(path, "logit", "toy", split, logits=z.astype(np.float32), labels=y)
        splits[split] = (*from_scores(z), y)
    write_toplabel(path, "top", "toy", splits)
    return splits
