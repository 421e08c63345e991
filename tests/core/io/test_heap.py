"""When :func:`calibview.core.io.heap.trim_heap` hands memory back: a trimmed heap keeps its free chunks (only their
pages go), so the free bytes stay above the slack after a trim and cannot be the only test, or every later chunk
trims and page-faults its temporaries back in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from calibview.core.io import heap

MB = 1 << 20


def test_a_trim_waits_for_the_resident_size_to_grow_by_the_slack(monkeypatch):
    trims, resident = [], [900 * MB]
    monkeypatch.setattr(heap, "_MALLOC_TRIM", lambda pad: (trims.append(pad), resident.__setitem__(0, 500 * MB)))
    monkeypatch.setattr(heap, "_FREE_BYTES", lambda: 4000 * MB)       # a fragmented heap: always "free"
    monkeypatch.setattr(heap, "_resident", lambda: resident[0])
    monkeypatch.setattr(heap, "_AFTER_TRIM", [0])

    heap.trim_heap()                                  # 900 MB resident, nothing trimmed yet: trim
    assert len(trims) == 1 and heap._AFTER_TRIM[0] == 500 * MB
    for grown in (100, 200, 255):                     # the next chunks fault their temporaries back in
        resident[0] = (500 + grown) * MB
        heap.trim_heap()
    assert len(trims) == 1
    resident[0] = (500 + 256) * MB                    # grown by the slack since the last trim: trim again
    heap.trim_heap()
    assert len(trims) == 2


def test_no_trim_while_little_is_free(monkeypatch):
    trims = []
    monkeypatch.setattr(heap, "_MALLOC_TRIM", lambda pad: trims.append(pad))
    monkeypatch.setattr(heap, "_FREE_BYTES", lambda: heap.TRIM_SLACK - 1)
    monkeypatch.setattr(heap, "_resident", lambda: 10_000 * MB)
    monkeypatch.setattr(heap, "_AFTER_TRIM", [0])
    heap.trim_heap()
    assert trims == []


def test_resident_size_is_read_from_proc():
    import os
    if not os.path.exists("/proc/self/statm"):
        assert heap._resident() == 0
        return
    big = bytearray(64 * MB)                          # touched: resident
    assert heap._resident() >= 64 * MB
    del big


HUGEPAGES = """
import sys
if sys.argv[1] == "numpy first":
    import numpy
from calibview.core.io.heap import tune_allocator
tune_allocator()
import numpy
print((getattr(numpy, '_core', None) or numpy.core).multiarray._get_madvise_hugepage())
"""


@pytest.mark.parametrize("order", ["numpy first", "numpy after"])
@pytest.mark.parametrize("user", [None, "0", "1"])
def test_numpys_huge_page_advice_is_off_after_tuning_unless_the_user_chose(order, user):
    """numpy reads NUMPY_MADVISE_HUGEPAGE when it is imported, so the advice must be switched off both in a numpy
    imported already and in one imported later; a user's own setting of the variable is left alone."""
    if sys.platform != "linux":
        pytest.skip("numpy advises huge pages on Linux only")
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if user is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = user
    r = subprocess.run([sys.executable, "-c", HUGEPAGES, order], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == ("True" if user == "1" else "False")
