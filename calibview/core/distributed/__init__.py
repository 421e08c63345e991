"""The Dask engine: the evaluation split's O(N x K) scoring farmed out as one task per shard, merged on the client.

- :mod:`.client`  connecting to a scheduler (an address) or starting a ``distributed.LocalCluster`` (``local[:N]``)
- :mod:`.shards`  the shard plan: every shard listed, checked by the local reader's guard and identified (size,
  mtime) before any task is scheduled; frozen records only
- :mod:`.tasks`   what runs on a worker: a shard opened read-only, scored by the local engine's chunk function,
  closed; numpy arrays back
- :mod:`.fit`     :class:`~.fit.ShardedSplit`: the fit split whose passes (temperature scaling's Newton moments,
  the scaling family's L-BFGS gradients) are maps over its shards
- :mod:`.engine`  :class:`~.engine.DaskEngine`: the local engine's stages with the fit of the methods that stream
  and the score stage made of maps over the shards, the resample stage on the client over the merged vectors

dask and distributed are an optional extra (``pip install calibview[dask]``): nothing here imports them at module
level, and nothing the core or the command line imports by default imports this package.
"""
