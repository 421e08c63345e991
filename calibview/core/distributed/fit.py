"""The fit split of a Dask run as the calibrators see it: a :class:`ShardedSplit`.

It is the local engine's streamed split of the shard glob (labels in memory, contiguous row slices read on the
client, chunks in shard order), plus :meth:`ShardedSplit.map_shards`: a pass over the split as one task per shard,
each task running a module-level function on its own shard and returning plain numbers. The methods whose fit is
full-batch passes ask for that where they would read the split (temperature scaling's Newton moments,
:mod:`calibview.core.calibrators.temperature`; the scaling family's standardisation and its NLL gradient,
:mod:`calibview.core.calibrators.scaling_fit`; the exact-zero count, :mod:`calibview.core.calibrators.checks`), so
each Newton or L-BFGS evaluation is one map and the client only takes the step. Anything else a streaming method
reads (a warm start's subsample of 10,000 rows) comes through the client's own reader, as without Dask.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

from calibview.core.distributed import tasks
from calibview.core.io.stream import StreamedSplit


class ShardedSplit(StreamedSplit):
    """The split ``split`` of run ``run`` over the shards of ``plan`` (:func:`calibview.core.distributed.shards.
    plan`, checked), read by the workers of ``client`` in :meth:`map_shards`; ``cancel`` ends a pass between
    shard tasks. ``maps`` counts the passes run on the cluster (tests and benchmarks read it)."""

    def __init__(self, client, plan, file: str, run, split: str, *, chunk_rows: Optional[int] = None,
                 cancel: Optional[threading.Event] = None) -> None:
        super().__init__(file, run, split, device="cpu", chunk_rows=chunk_rows)
        self.client, self.plan, self.cancel = client, tuple(plan), cancel
        self.maps = 0

    def map_shards(self, fn, *args) -> list:
        """``fn(shard's split, *args)`` for every shard, on the cluster, results in shard order (a
        CalibviewError in a task ends the pass with its sentence; a cancel cancels the futures)."""
        from calibview.core.distributed.client import gather

        futures = [self.client.submit(tasks.run_on_shard, s, fn, args, self.chunk_rows, pure=False,
                                      key=f"calibview-fit-{s.index}-{time.monotonic_ns()}") for s in self.plan]
        results = gather(self.client, futures, self.cancel)
        self.maps += 1
        return [r["value"] for r in results]
