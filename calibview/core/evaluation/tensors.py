"""The torch side of a request: the device it runs on and the scores as the calibrators see them."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.io import schema


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when torch sees a GPU, else the CPU; ``cuda`` without a GPU is a user error."""
    device = (device or "auto").lower()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError("device=cuda was requested but torch sees no CUDA GPU on this machine; "
                             "use device=cpu or auto.", "device")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise CalibviewError(f"Unknown device {device!r}; use cpu, cuda or auto.")
    return torch.device(device)


def scores_tensor(data: schema.SplitData, device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits as stored; probabilities become log-probabilities (log 0 = -inf), so calibrators see one kind."""
    with warnings.catch_warnings():
        # The arrays are read-only on purpose; torch warns about that, but nothing here writes to them.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.asarray(data.scores))
    if data.kind == "probs":
        t = torch.log(t.to(torch.float64))
    return t.to(device)
