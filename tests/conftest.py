import os
from pathlib import Path

import pytest

import calibview

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real CIFAR logits of ../shared/data (skips the few tests that need them when absent)."""
    if not (SHARED_DATA / "mukhoti_brier_cifar10_resnet110.npz").is_file():
        pytest.skip("../shared/data is not present in this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_file() -> Path:
    return calibview.demo_path()
