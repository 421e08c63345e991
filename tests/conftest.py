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


@pytest.fixture(autouse=True)
def _fresh_file_listings():
    """Each test starts with no remembered file listings (calibview.core.io.discovery keeps those of settled files,
    such as the demo): a test that changes how a file is read must see it read."""
    from calibview.core.io import discovery

    discovery._cache.clear()
    yield


# ------------------------------------------------------------------------------ fuzzing (tests/core/io/test_fuzz.py)
try:
    from hypothesis import HealthCheck, settings
except ImportError:            # the fuzz suite skips itself without hypothesis
    settings = None
if settings is not None:
    _checks = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
    # ci: about 40 s on two shared cores (the suite's budget is under two minutes); nightly: a long run
    settings.register_profile("ci", max_examples=1200, deadline=10_000, suppress_health_check=_checks,
                              print_blob=True)
    settings.register_profile("nightly", max_examples=20_000, deadline=10_000, suppress_health_check=_checks,
                              print_blob=True)
    settings.load_profile(os.environ.get("CALIBVIEW_FUZZ_PROFILE", "ci"))   # --hypothesis-profile overrides


def pytest_terminal_summary(terminalreporter, config):
    stats = config.__dict__.get("calibview_fuzz")
    if stats:
        terminalreporter.write_line(f"calibview fuzz: {stats['cases']} cases ({stats['valid']} valid by "
                                    f"construction), longest case {stats['longest']:.2f} s")
