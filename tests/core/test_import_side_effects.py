"""Importing calibview changes nothing process-wide: no glibc mallopt, no umask dance.

The allocator is tuned by the programs that evaluate (cli.main, gui.app.main, the benchmarks), not by a library
import; the umask is read (from /proc/self/status where there is one), never set, until a file is written."""

import os
import stat
import subprocess
import sys

import pytest

from calibview.core.io import safe_io

# In a fresh process: spy on os.umask and on glibc's mallopt, import the core, then run one CLI command.
SPY = """
import ctypes, json, os, sys
umask_calls, mallopt_calls = [], []
real_umask, real_cdll = os.umask, ctypes.CDLL
os.umask = lambda mask: umask_calls.append(mask) or real_umask(mask)

class Spy:
    def __init__(self, lib):
        self._lib = lib
    def __getattr__(self, name):
        if name == "mallopt":
            return lambda *a: mallopt_calls.append(a) or self._lib.mallopt(*a)
        return getattr(self._lib, name)

ctypes.CDLL = lambda name, *a, **k: Spy(real_cdll(name, *a, **k)) if name == "libc.so.6" else real_cdll(name, *a, **k)
real_umask(0o027)
import calibview, calibview.core, calibview.core.evaluation.request, calibview.core.reports.tables, calibview.core.io.stream
import calibview.core.io.importers, calibview.core.io.logits, calibview.cli.program
import numpy
advice = (getattr(numpy, "_core", None) or numpy.core).multiarray._get_madvise_hugepage     # numpy 2 | numpy 1
after_import = {"umask": list(umask_calls), "mallopt": list(mallopt_calls), "mask": real_umask(0o027),
                "numpy_hugepages": advice()}
from calibview.core.io import heap
has_libc = heap._LIBC is not None
rc = calibview.cli.program.main(["metrics", sys.argv[1], "--calibrators", "none", "--n-boot", "0", "--json"])
print(json.dumps({"after_import": after_import, "mallopt_after_main": mallopt_calls, "rc": rc,
                  "has_libc": has_libc, "numpy_hugepages_after_main": advice()}))
"""


@pytest.fixture(scope="module")
def spied(demo_file):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "NUMPY_MADVISE_HUGEPAGE"}
    r = subprocess.run([sys.executable, "-c", SPY, str(demo_file)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_neither_sets_the_umask_nor_calls_mallopt(spied):
    assert spied["after_import"]["umask"] == []
    assert spied["after_import"]["mallopt"] == []
    assert spied["after_import"]["mask"] == 0o027


def test_the_cli_tunes_the_allocator_when_it_runs(spied):
    if not spied["has_libc"]:
        pytest.skip("not glibc: there is no allocator to tune")
    assert spied["rc"] == 0
    assert len(spied["mallopt_after_main"]) == 2          # M_MMAP_THRESHOLD and M_TRIM_THRESHOLD, once


def test_the_cli_switches_numpys_huge_page_advice_off_when_it_runs(spied):
    if sys.platform != "linux":
        pytest.skip("numpy advises huge pages on Linux only")
    assert spied["after_import"]["numpy_hugepages"] is True     # importing calibview leaves numpy as it was
    assert spied["numpy_hugepages_after_main"] is False


@pytest.mark.parametrize("proc", [True, False])
def test_a_new_file_gets_0666_minus_the_umask(tmp_path, monkeypatch, proc):
    if not proc:                               # no /proc: fall back to setting and restoring the umask
        monkeypatch.setattr(safe_io, "PROC_STATUS", str(tmp_path / "no-such-status"))
    old = os.umask(0o027)
    try:
        safe_io.atomic_write(tmp_path / "new.csv", "a,b\n")
        assert os.umask(0o027) == 0o027        # the write left the umask as it found it
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o640
    os.chmod(tmp_path / "new.csv", 0o600)      # a replaced file keeps its own mode
    safe_io.atomic_write(tmp_path / "new.csv", "c,d\n")
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o600
