"""glibc's allocator and numpy's huge-page advice: :func:`tune_allocator`, the program's start-up choice, and
:func:`trim_heap`, called once per chunk by the passes over a split. Imports nothing but ctypes, so that a program
can tune the allocator at start-up without loading numpy or torch (``calibview runs`` and ``--help`` load neither)."""

from __future__ import annotations

import os
import sys


def _libc():
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:                         # not glibc (macOS, Windows, musl): nothing to do
        return None


_LIBC = _libc()
_MALLOC_TRIM = _LIBC.malloc_trim if _LIBC is not None else None


def _free_bytes():
    """A function giving the bytes glibc holds free in its heap (mallinfo2, glibc >= 2.33), or None."""
    if _LIBC is None or not hasattr(_LIBC, "mallinfo2"):
        return None
    import ctypes

    class _Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks",
                                                         "keepcost")]

    _LIBC.mallinfo2.restype = _Info
    return lambda: int(_LIBC.mallinfo2().fordblks)


_FREE_BYTES = _free_bytes()
#: free heap bytes :func:`trim_heap` leaves alone: trimming less often keeps the temporaries' pages mapped
TRIM_SLACK = 256 << 20


def tune_allocator() -> None:
    """Let glibc keep freed memory for reuse instead of unmapping it at once. A process-wide setting, so it is
    the program's choice, not a library import's: the CLI's and the window's main() and the benchmarks call it
    at start-up; a program embedding calibview may call it too.

    A pass over a split allocates and frees (rows, K) float64 temporaries of ~16 MB per chunk. With glibc's
    defaults each one is freshly mapped (or the heap top trimmed and regrown), so every chunk pays page faults
    for all of them: the scoring pass of a 50,000 x 1,000 none+ts report took 1.3 s, 0.36 s with these settings,
    and the peak memory of that report went down, not up (0.91 GB instead of 1.2 GB). Blocks up to 32 MB come
    from the heap; the heap is trimmed only above 256 MB free, or by :func:`trim_heap`. A user's own MALLOC_*
    environment settings win. It also keeps numpy from asking for transparent huge pages
    (:func:`_no_numpy_hugepages`), unless the user's NUMPY_MADVISE_HUGEPAGE says otherwise."""
    _no_numpy_hugepages()
    if _LIBC is None or any(k.startswith("MALLOC_") for k in os.environ):
        return
    _LIBC.mallopt(-3, 32 << 20)             # M_MMAP_THRESHOLD
    _LIBC.mallopt(-1, 256 << 20)            # M_TRIM_THRESHOLD


def _no_numpy_hugepages() -> None:
    """Stop numpy from advising transparent huge pages for its large arrays (NUMPY_MADVISE_HUGEPAGE=0), unless
    the user set that variable. On Linux, numpy madvises every array of 4 MB or more for huge pages, and the
    kernel's default THP policy (defrag "madvise") then compacts memory synchronously on the first touch of such
    an array when no free huge page is at hand. On this project's 2-core VMs that made first touches about 20x
    slower: writing 400 MB of fresh arrays took 4.0-4.2 s with the advice, 0.21 s without (touch loop, fresh
    processes), and the headline 2 x 50,000 x 1,000 none+ts report, whose logits are read into numpy arrays,
    ran 12.3-14.3 s against 14.2-20.9 s with it (3 interleaved pairs; system time 1.2-1.5 s against 3.1-3.2 s).
    torch's allocator gives no such advice by default. The variable is read when numpy is imported, and the
    setting is also switched off in a numpy imported already; child processes inherit the variable."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    os.environ["NUMPY_MADVISE_HUGEPAGE"] = "0"
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return
    core = getattr(numpy, "_core", None) or getattr(numpy, "core", None)        # numpy 2 | numpy 1
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)


def _resident() -> int:
    """The process's resident bytes (Linux /proc/self/statm), or 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: the resident bytes right after the last trim
_AFTER_TRIM = [0]


def trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc's malloc_trim), once more than :data:`TRIM_SLACK` is free.

    A pass over a split allocates and frees many (rows, K) temporaries, interleaved with small long-lived
    results; glibc keeps the holes this leaves, and the resident size of a streamed 200,000 x 1,000 report
    wandered between 0.8 and 1.8 GB from run to run. Trimming keeps it at the low end. Trimming after every chunk
    made every chunk page-fault its temporaries back in (a 50,000 x 1,000 none+ts report spent 1.5 s of 9 s
    on it); with the slack (the same as glibc's own trim threshold above) the pages of the usual temporaries stay
    mapped, and that report's peak stayed within 1.5x its logits (measured 2026-12-01: 572 MB above the
    imports with 256 MB of slack, 605 MB with 64 MB, 964 MB without trimming).

    The free bytes alone cannot say when to trim again: a trimmed heap's free chunks stay free, their pages merely
    unmapped, so once the heap held 256 MB of holes every later chunk trimmed (and page-faulted its temporaries
    back in: 9 million faults and 40 % more time in a streamed 500,000 x 1,000 report, in two runs of three). So
    a trim also waits until the resident size has grown by :data:`TRIM_SLACK` since the last one (64 MB was too
    little: a chunk's temporaries alone grow it by about that much, and the storm came back)."""
    if _MALLOC_TRIM is None:
        return
    if _FREE_BYTES is not None and _FREE_BYTES() < TRIM_SLACK:
        return
    rss = _resident()
    if rss and rss - _AFTER_TRIM[0] < TRIM_SLACK:
        return
    _MALLOC_TRIM(0)
    _AFTER_TRIM[0] = _resident()
