"""The window's process runs torch's OpenMP threads passive: spinning idle threads starve the
evaluation whenever the GUI, Qt's render threads or anything else on the desktop needs a core."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
from calibview.gui import app
assert "torch" not in sys.modules, "importing calibview.gui.app loaded torch: too late to set up OpenMP"
took = app.configure_openmp()
import torch                                            # libgomp reads OMP_WAIT_POLICY now, once
print(took, os.environ.get("OMP_WAIT_POLICY"), app.configure_openmp())
"""


def _probe(**env):
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=True,
                         env=dict(base, PYTHONPATH=str(ROOT), **env))
    return out.stdout.split()


def test_app_makes_openmp_passive_before_torch_loads():
    assert _probe() == ["True", "PASSIVE", "False"]     # False: once torch is loaded it is too late to change


def test_an_explicit_wait_policy_wins():
    assert _probe(OMP_WAIT_POLICY="ACTIVE") == ["True", "ACTIVE", "False"]
