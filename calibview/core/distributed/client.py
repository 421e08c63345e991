"""A ``distributed.Client`` for ``--scheduler``: ``local[:WORKERS]`` starts (and later closes) a LocalCluster of
worker processes; anything else is the address of a running scheduler (``tcp://host:8786``)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Union

from calibview.core.errors import CalibviewError, ParameterError

#: workers of ``--scheduler local`` without a count: the cores, at most 4 (each worker holds a shard's chunk)
DEFAULT_LOCAL_WORKERS = 4
INSTALL = "pip install calibview[dask]"


def require_dask():
    """The ``distributed`` module, or a CalibviewError saying how to install it."""
    import importlib

    try:
        importlib.import_module("dask")
        distributed = importlib.import_module("distributed")
    except ImportError:
        raise CalibviewError(f"--engine dask needs dask and distributed, which are not installed; install them "
                             f"with {INSTALL}.") from None
    return distributed


def local_workers(scheduler: str) -> int | None:
    """The worker count of ``local`` / ``local:N`` (None for an address); ParameterError for a bad count."""
    if scheduler != "local" and not scheduler.startswith("local:"):
        return None
    text = scheduler.partition(":")[2]
    if not text:
        return max(1, min(DEFAULT_LOCAL_WORKERS, os.cpu_count() or 1))
    if not text.isdigit() or int(text) < 1:
        raise ParameterError(f"scheduler=local:N needs a positive number of workers, not {text!r}.", "scheduler")
    return int(text)


@contextlib.contextmanager
def connect(scheduler: Union[str, object, None] = "local") -> Iterator[object]:
    """A connected ``distributed.Client``: ``scheduler`` is ``local[:N]`` (a LocalCluster of N single-threaded
    worker processes, closed on exit), a scheduler address, or a Client of the caller's (used, not closed)."""
    distributed = require_dask()
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    scheduler = str(scheduler or "local")
    workers = local_workers(scheduler)
    if workers is not None:
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise ParameterError(f"Could not reach the Dask scheduler at scheduler={scheduler} ({e}); start it "
                             "(dask scheduler) or use scheduler=local:N.", "scheduler") from None
    with client:
        yield client


def gather(client, futures: list, cancel=None, on_done=None) -> list:
    """The results of ``futures`` in their order: ``cancel`` (a threading.Event, checked as each task finishes)
    and Ctrl+C cancel every future; ``on_done(count)`` after each finished task; a task's ``{"error": sentence}``
    (:func:`calibview.core.distributed.tasks.guarded`) ends the map with that sentence."""
    from distributed import as_completed

    from calibview.core.errors import check_cancel

    try:
        for count, _ in enumerate(as_completed(futures), 1):
            check_cancel(cancel)
            if on_done is not None:
                on_done(count)
        results = [f.result() for f in futures]
    except BaseException:
        client.cancel(futures)
        raise
    for r in results:
        if "error" in r:
            raise CalibviewError(r["error"])
    return results
