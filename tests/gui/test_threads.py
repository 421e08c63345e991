"""The window's process cuts how long torch's idle OpenMP threads spin before torch loads: threads that spin
long starve the evaluation whenever the GUI, Qt's render threads or anything else on the desktop needs a core,
and fully passive ones pay a wake-up at every small operation (calibview.startup.configure_openmp)."""

import os
import subprocess
import sys
from pathlib import Path

from calibview.startup import SPIN_COUNT

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys, time
from calibview.gui import app
assert "torch" not in sys.modules, "importing calibview.gui.app loaded torch: too late to set up OpenMP"
took = app.configure_openmp()
import torch                                            # libgomp reads its settings now, once
x = torch.rand(1 << 20, dtype=torch.float64)
for _ in range(3):
    x.exp()                                             # a parallel region on every thread of the team
c = time.process_time()
time.sleep(0.3)
idle_ms = (time.process_time() - c) * 1e3               # what the idle team burnt meanwhile
print(took, *(os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")),
      app.configure_openmp(), idle_ms)
"""

SET_BY_US = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _probe(**env):
    base = {k: v for k, v in os.environ.items() if k not in SET_BY_US}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=True,
                         env=dict(base, PYTHONPATH=str(ROOT), **env))
    *words, idle_ms = out.stdout.split()
    return words, float(idle_ms)


def test_app_cuts_the_openmp_spin_before_torch_loads():
    words, idle_ms = _probe()
    assert words == ["True", "None", SPIN_COUNT, "0", "False"]    # False: once torch is loaded it is too late
    # an idle team that kept spinning would burn the whole 300 ms sleep on a core (ACTIVE does: 300 ms per thread)
    assert idle_ms < 100


def test_an_explicit_wait_policy_wins():
    words, idle_ms = _probe(OMP_WAIT_POLICY="ACTIVE")
    assert words == ["True", "ACTIVE", "None", "None", "False"]
    if (os.cpu_count() or 1) > 1 and "OMP_NUM_THREADS" not in os.environ:
        assert idle_ms > 150            # the probe itself can fail: ACTIVE threads spin through the sleep


def test_an_explicit_spin_count_wins():
    words, _ = _probe(GOMP_SPINCOUNT="0")
    assert words == ["True", "None", "0", "None", "False"]
