"""How much memory a split takes once loaded and how much it may take before it is streamed from disk
(it imports neither torch nor numpy, so the command line can show the default in its help without loading them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from calibview.core.errors import CalibviewError

if TYPE_CHECKING:                      # for the annotation only: schema loads h5py and numpy
    from calibview.core.io import schema

#: default ``max_memory``: splits larger than this in memory are streamed from disk (2 GiB)
DEFAULT_MAX_MEMORY = 2 << 30


def parse_size(text: Union[str, int, float, None]) -> Optional[int]:
    """``"2G"``, ``"512M"``, ``"1.5GiB"``, ``"100000000"`` (bytes) -> bytes; None or ``"auto"`` -> None."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        t = text.strip().lower().removesuffix("ib").removesuffix("b")
        if t in ("", "auto"):
            return None
        scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(t[-1:], 1)
        try:
            value = float(t[:-1] if scale > 1 else t) * scale
        except ValueError:
            raise CalibviewError(f"Cannot read the memory size {text!r}; write it like 2G, 512M or 1.5G.") from None
    if not value > 0:
        raise CalibviewError(f"The memory size must be positive, not {text!r}.")
    return int(value)


def memory_bytes(info: schema.SplitInfo) -> int:
    """Bytes the split takes once loaded: float16 widens to float32, probabilities become float64 log-probs."""
    import numpy as np

    # a split with members is read as their ensemble, float64 probabilities
    itemsize = 8 if info.kind == "probs" or getattr(info, "members", 0) or np.dtype(info.dtype).itemsize >= 8 else 4
    return int(info.n) * int(info.k) * itemsize


def human(nbytes: float) -> str:
    """``nbytes`` for a message, in decimal units: "1.5 GB", "12.0 MB", "3.2 kB", "512 B"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"
