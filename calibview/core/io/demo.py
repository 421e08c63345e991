"""Where the bundled demo file lives; shared by the CLI and the window (which must not import the CLI)."""

from __future__ import annotations

from pathlib import Path

from calibview.core.errors import CalibviewError


def demo_path() -> Path:
    """The bundled demo file (real CIFAR ResNet-110 logits, see calibview/resources/DEMO_SOURCES.md)."""
    candidate = Path(__file__).resolve().parents[2] / "resources" / "demo.h5"      # package data
    if candidate.is_file():
        return candidate
    raise CalibviewError("The bundled demo file calibview/resources/demo.h5 is missing from this installation; "
                         "give an HDF5 file explicitly.")
