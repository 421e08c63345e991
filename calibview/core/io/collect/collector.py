"""Logits collected from a torch model into the HDF5 format (docs/FORMAT.md, "Collecting logits from a model"):
the model's mode is checked and restored, the forward passes run in eval mode under ``torch.inference_mode()``
with autocast off, and every batch is stored as float32 when it arrives
(:mod:`calibview.core.io.collect.partial`), so memory stays one batch and an interrupted collection resumes after
its last complete batch.

``calibview.collect_logits`` (the Python API) and ``calibview collect`` (the command line) both call
:func:`collect`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import zlib
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import torch

from calibview._version import __version__
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.io.collect.partial import PartialSplit, commit, finished_split
from calibview.core.io.schema import PathLike, SplitInfo, abspath, join
from calibview.core.io.writer import _run_path

log = logging.getLogger("calibview")

#: the layers MC dropout switches to train mode (and nothing else)
DROPOUT_TYPES = tuple(getattr(torch.nn, name) for name in
                      ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")
                      if hasattr(torch.nn, name))


def collect(model: torch.nn.Module, loader: Iterable, path: PathLike, model_name: str, dataset: str, split: str,
            *, class_names: Optional[Sequence[str]] = None, meta: Optional[Mapping[str, object]] = None,
            device: str = "auto", members: Optional[int] = None, allow_train: bool = False,
            progress: bool = True) -> SplitInfo:
    """Run ``model`` over ``loader`` and store ``/<model_name>/<dataset>/<split>`` in ``path``: ``logits`` (N, K)
    float32 from eval mode, ``labels`` (N,) int64, metadata columns, and with ``members=M`` the (M, N, K) float32
    MC-dropout passes; returns the split as listed from the file. See ``calibview.collect_logits`` for the rules."""
    file = abspath(path)
    run_path = _run_path(file, model_name, dataset, [split])
    if members is not None and (isinstance(members, bool) or not isinstance(members, int) or members < 2):
        # one pass is no ensemble: the reader refuses M = 1, so it is refused before any forward pass
        raise ParameterError(f"members must be a whole number of MC-dropout passes, 2 or more, not {members!r}.",
                             "members")
    if not isinstance(model, torch.nn.Module):
        raise CalibviewError(f"The model must be a torch.nn.Module, not {type(model).__name__}.")
    training = [name for name, m in model.named_modules() if m.training]
    if training and not allow_train:
        which = "model.training is True" if training[0] == "" else f"its module {training[0]!r} is"
        raise ParameterError(f"The model is in training mode ({which}; {len(training)} of its "
                             f"{len(list(model.modules()))} modules are): dropout and batch-norm in training mode "
                             f"corrupt the logits; call model.eval() first, or pass allow_train=True to collect in "
                             f"eval mode anyway.", "allow_train")
    dropout = [m for m in model.modules() if isinstance(m, DROPOUT_TYPES)]
    if members and not dropout:
        raise ParameterError(f"members={members} asks for MC-dropout passes but the model has no dropout layer "
                             f"(torch.nn.Dropout and its variants); collect without members.", "members")
    if finished_split(file, run_path, split):
        log.warning(f"note: {file} already holds {join(run_path, split)}; it is not collected again (delete it "
                    f"from the file to collect it anew).")
        return _listed(file, run_path, split)
    target = _device(model, device)
    with PartialSplit(file, run_path, split, members) as part:
        if not part.complete:
            batches = _run(model, loader, part, target, dropout, members, progress)
        else:
            batches = part.batches
        info = {"calibview": __version__, "torch": torch.__version__,
                "dtype": str(_dtype(model)).replace("torch.", ""), "eval_mode": True, "device": str(target),
                "batches": batches}
        if members:
            info.update({"members": members,
                         "member_seeds": "torch.manual_seed(crc32(split path) + batch index) per batch"})
        commit(part, class_names=class_names, meta=meta, collected_with=info)
    return _listed(file, run_path, split)


def _listed(file: str, run_path: str, split: str) -> SplitInfo:
    from calibview.core.io.discovery import list_runs

    run = next(r for r in list_runs(file) if r.path == run_path)
    return run.split(split)


def _dtype(model: torch.nn.Module) -> torch.dtype:
    """The floating dtype of the model's first floating parameter or buffer (float32 when it has none)."""
    for t in list(model.parameters()) + list(model.buffers()):
        if t.is_floating_point():
            return t.dtype
    return torch.float32


def _device(model: torch.nn.Module, device: str) -> torch.device:
    """``auto``: where the model is when that is an accelerator, else CUDA when torch sees one, else the CPU;
    ``cpu``, ``cuda``, ``cuda:1``, ...: that device (the model is moved there for the collection only)."""
    where = next((t.device for t in list(model.parameters()) + list(model.buffers())), torch.device("cpu"))
    name = (device or "auto").lower()
    if name == "auto":
        if where.type != "cpu":
            return where
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError("device=cuda was requested but torch sees no CUDA GPU on this machine; use "
                             "device=cpu or auto.", "device")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ParameterError(f"Unknown device {device!r}; use cpu, cuda, cuda:N or auto.", "device") from None


def _autocast_off(device: torch.device):
    try:
        return torch.autocast(device_type=device.type, enabled=False)
    except RuntimeError:                # a device type without autocast: nothing to switch off
        return contextlib.nullcontext()


def _run(model, loader, part: PartialSplit, target: torch.device, dropout: list, members: Optional[int],
         progress: bool) -> int:
    """The forward passes over every batch after ``part``'s complete ones; the model's modes and device are
    restored afterwards, also on an exception. Returns the number of batches."""
    modes = [(m, m.training) for m in model.modules()]
    home = next((t.device for t in list(model.parameters()) + list(model.buffers())), target)
    dtype = _dtype(model)
    bar = _Bar(_length(loader), part.where.lstrip("/"), part.batches, enabled=progress)
    try:
        model.eval()
        if home != target:
            model.to(target)
        with torch.inference_mode(), _autocast_off(target):
            index, seen = -1, 0
            for index, batch in enumerate(loader):
                inputs, labels, columns = _unpack(batch, part, index)
                if index < part.batches:             # collected before: only check it is the same batch
                    seen = _check_resumed(part, index, labels, seen)
                    continue
                x = _to(inputs, target, dtype)
                logits = _logits(model(x), part, index)
                stack = None
                if members:
                    stack = _mc_dropout(model, x, dropout, members, _seed(part, index), target, part)
                part.append(logits, labels, stack, columns)
                bar.update(index + 1)
            if index + 1 < part.batches:
                raise CalibviewError(f"The loader yielded {index + 1} batches but {part.batches} were collected "
                                     f"before into {part.path}; resume with the same loader (in the same order), "
                                     f"or delete that file to start again.")
        part.finish()
        bar.close(part.rows)
        return part.batches
    except BaseException:
        bar.stop()
        if part.batches:
            log.warning(f"note: the {part.batches} complete batches of {part.where.lstrip('/')} are kept in "
                        f"{part.path}; collect again with the same loader to resume after them.")
        raise
    finally:
        bar.stop()
        if home != target:
            model.to(home)
        for m, mode in modes:
            m.training = mode


def _length(loader) -> Optional[int]:
    try:
        return len(loader)
    except TypeError:
        return None


def _unpack(batch, part: PartialSplit, index: int):
    """(inputs, labels (B,) int64, {column: (B,) values}) of a batch ``(inputs, labels)`` or
    ``(inputs, labels, meta_dict)``."""
    if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
        raise CalibviewError(f"Batch {index} of the loader for {part.where} is a {type(batch).__name__}; the loader "
                             f"must yield (inputs, labels) or (inputs, labels, meta_dict).")
    inputs, labels = batch[0], batch[1]
    columns = batch[2] if len(batch) == 3 else {}
    if not isinstance(columns, Mapping):
        raise CalibviewError(f"The third item of batch {index} for {part.where} is a {type(columns).__name__}; it "
                             f"must be a dict {{column: one value per sample}}.")
    y = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise CalibviewError(f"The labels of batch {index} for {part.where} have shape {y.shape} and dtype "
                             f"{y.dtype}; give (batch,) integer class indices.")
    cols = {str(c): (v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v))
            for c, v in columns.items()}
    return inputs, y.astype(np.int64), cols


def _check_resumed(part: PartialSplit, index: int, labels: np.ndarray, start: int) -> int:
    """Compare a batch collected before (its rows start at ``start``) with the stored labels; returns where the
    next batch starts."""
    stop = start + len(labels)
    if not np.array_equal(part.labels(start, stop), labels) or (index + 1 == part.batches and stop != part.rows):
        raise CalibviewError(f"Batch {index} of the loader has other labels than the one collected before into "
                             f"{part.path}; to resume, the loader must yield the same batches in the same order "
                             f"(no shuffling), or delete that file to start again.")
    return stop


def _to(inputs, device: torch.device, dtype: torch.dtype):
    """Tensors (also inside tuples, lists and dicts) moved to ``device``; floating ones cast to the model's dtype."""
    if isinstance(inputs, torch.Tensor):
        inputs = inputs.to(device)
        return inputs.to(dtype) if inputs.is_floating_point() and inputs.dtype != dtype else inputs
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_to(v, device, dtype) for v in inputs)
    if isinstance(inputs, dict):
        return {k: _to(v, device, dtype) for k, v in inputs.items()}
    return inputs


def _logits(out, part: PartialSplit, index: int) -> np.ndarray:
    """The model's output for one batch as (B, K) float32 numpy."""
    if not isinstance(out, torch.Tensor) or out.ndim != 2:
        what = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else f"a {type(out).__name__}"
        raise CalibviewError(f"The model returned {what} for batch {index} of {part.where}; it must return a "
                             f"(batch, K) tensor of logits.")
    return out.detach().to(torch.float32).cpu().numpy()


def _seed(part: PartialSplit, index: int) -> int:
    """The seed of batch ``index``'s dropout masks: fixed by the split's path and the batch, so that a resumed
    collection draws the masks an uninterrupted one would, and two splits draw different ones."""
    return (zlib.crc32(part.where.encode("utf-8")) + index) % (1 << 63)


def _mc_dropout(model, x, dropout: list, m: int, seed: int, device: torch.device, part) -> np.ndarray:
    """(M, B, K) float32: M forward passes with only the dropout layers in train mode, the masks drawn from
    ``torch.manual_seed(seed)`` inside ``fork_rng``, so the caller's random state is left as it was."""
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for layer in dropout:
            layer.train()
        try:
            passes = [_logits(model(x), part, part.batches) for _ in range(m)]
        finally:
            for layer in dropout:
                layer.eval()
    return np.stack(passes)


class _Bar:
    """Batches done, on stderr: a tqdm bar when tqdm is installed, else one plain line (rewritten in place on a
    terminal, written once at the end elsewhere)."""

    def __init__(self, total: Optional[int], what: str, initial: int, enabled: bool = True) -> None:
        self.total, self.what, self.enabled, self.tqdm = total, what, enabled, None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self.tqdm = tqdm(total=total, initial=initial, desc=f"collecting {what}", unit="batch", file=sys.stderr)

    def update(self, done: int) -> None:
        """``done`` batches are complete."""
        if not self.enabled:
            return
        if self.tqdm is not None:
            self.tqdm.update(done - self.tqdm.n)
        elif sys.stderr.isatty():
            of = f"/{self.total}" if self.total else ""
            sys.stderr.write(f"\rcalibview: collecting {self.what}: batch {done}{of}")
            sys.stderr.flush()

    def close(self, rows: int) -> None:
        """The collection is complete: the plain line says so."""
        if self.enabled and self.tqdm is None:
            end = "\r" if sys.stderr.isatty() else ""
            sys.stderr.write(f"{end}calibview: collected {self.what}: {rows} rows\n")

    def stop(self) -> None:
        """Close the tqdm bar (complete or not)."""
        if self.tqdm is not None:
            self.tqdm.close()
            self.tqdm = None
