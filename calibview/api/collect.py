"""Logits straight from a torch model into a calibview HDF5 file: :func:`collect_logits`."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import torch

from calibview.core.io.collect.collector import collect
from calibview.core.io.schema import PathLike, SplitInfo


def collect_logits(model: torch.nn.Module, loader: Iterable, path: PathLike, model_name: str, dataset: str,
                   split: str, *, class_names: Optional[Sequence[str]] = None,
                   meta: Optional[Mapping[str, object]] = None, device: str = "auto", members: Optional[int] = None,
                   allow_train: bool = False) -> SplitInfo:
    """Run ``model`` over ``loader`` and store ``/<model_name>/<dataset>/<split>`` in the HDF5 file ``path``
    (created, or appended to), ready for ``calibview metrics``, ``report`` and :func:`calibview.evaluate`.

    - ``loader`` yields ``(inputs, labels)`` or ``(inputs, labels, meta_dict)``: ``inputs`` a tensor (or a tuple,
      list or dict of tensors) passed to ``model(inputs)``, ``labels`` (B,) integer class indices,
      ``meta_dict`` {column: (B,) values} stored as metadata columns (``calibview slices --by COLUMN``). Floating
      inputs are cast to the model's dtype and moved to its device.
    - The model must return (B, K) logits. The passes run in eval mode under ``torch.inference_mode()`` with
      autocast disabled, and the logits are stored as float32 (N, K), whatever the model's dtype (a bfloat16
      model gives float32 logits of its bfloat16 outputs). The modes of every module (and the model's device)
      are restored afterwards, also on an exception.
    - A model left in training mode (any module with ``training=True``) is refused before anything runs: dropout
      and batch-norm in training mode corrupt the logits. ``allow_train=True`` collects it anyway (in eval mode).
    - Each batch is written when it arrives (memory stays one batch) to a hidden file beside ``path``; when the
      loader is exhausted the split is copied into ``path`` in one safe write and the hidden file is removed.
      After an interruption, calling again with the same arguments resumes after the last complete batch (the
      loader must yield the same batches in the same order; the batches before are read for their labels only,
      which must match). A split that ``path`` already holds is not collected again.
    - ``members=M`` (a model with dropout layers) also stores ``members`` (M, N, K) float32, attribute
      ``kind = "mc-dropout"``: M passes per batch with only the dropout layers in train mode, seeded per batch
      by its index (the caller's random state is left as it was), beside the eval-mode ``logits``.
    - ``class_names``: K strings, stored on the run group; ``meta``: {column: (N,) values} for the whole split.
    - ``device``: ``auto`` (where the model is if that is an accelerator, else CUDA when torch sees one, else the
      CPU), ``cpu``, ``cuda`` or ``cuda:N``.
    - The split group's attribute ``collected_with`` is a JSON object: calibview and torch versions, the model's
      dtype, ``eval_mode``, the device, the batch count (and ``members``).

    Returns the written split's :class:`~calibview.core.io.schema.SplitInfo` (name, path, N, K, ...). Bad input
    raises :class:`calibview.CalibviewError` with one sentence; exceptions from the model or the loader pass
    through unchanged (the batches completed before them are kept for the next call)."""
    return collect(model, loader, path, model_name, dataset, split, class_names=class_names, meta=meta,
                   device=device, members=members, allow_train=allow_train)
