"""The wheel a user installs: it carries the demo, its provenance notice, the icons, the desktop entry and the
templates, and none of the maintainer scripts; installed into a fresh virtual environment, it opens the demo."""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                        str(out), str(ROOT)], capture_output=True, text=True, cwd=out)
    assert r.returncode == 0, r.stdout + r.stderr
    (found,) = out.glob("calibview-*.whl")
    return found


def test_the_wheel_holds_the_package_data_and_no_maintainer_script(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("calibview/resources/demo.h5", "calibview/resources/DEMO_SOURCES.md",
                   "calibview/resources/calibview.desktop", "calibview/resources/icons/calibview.svg",
                   "calibview/resources/icons/calibview-256.png"):
        assert needed in names, needed
    assert not [n for n in names if "build_demo" in n or "build_icons" in n or n.startswith("tests/")]


def test_installed_into_a_fresh_venv_it_opens_the_demo(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # The dependencies come from this environment (no network); only calibview itself is installed from the wheel.
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import calibview, sys; p = calibview.demo_path(); "
            "assert str(p).startswith(sys.argv[1]), p; "
            "from calibview.core.io.discovery import list_runs; "
            "from calibview.core.io.regression.discovery import list_regression_runs; "
            "print(p, len(list_runs(p)), len(list_regression_runs(p)))")
    r = subprocess.run([str(py), "-c", code, site], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    # the classification runs: three runs and the ensemble of two of them; then the two regression runs on the
    # diabetes data (bayesian-ridge var, gbr-quantile quantiles), which list_runs does not count
    assert r.stdout.split()[-2:] == ["4", "2"], r.stdout
    out = tmp_path / "report"
    r = subprocess.run([str(venv / "bin" / "calibview"), "metrics", "--run", "resnet110-brier/cifar10",
                        "--calibrators", "none", "--n-boot", "0"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0 and "cifar10" in r.stdout, r.stderr
    assert not out.exists()
