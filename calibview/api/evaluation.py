"""``calibview.evaluate``: the engine on arrays still in memory (a notebook right after training).

The arrays become an in-memory run (:mod:`calibview.core.io.arrays`) with the splits ``fit`` and ``test``, which
the engine reads as it reads a file: ``evaluate(...).rows`` are exactly the records of ``calibview metrics
--json --fit-split fit --eval-split test`` on the same arrays written to an HDF5 file
(``/<model>/<dataset>/{fit,test}``). Everything the engine does applies: every metric and calibrator, bootstrap
intervals, ablation lists, the cache (a :class:`~calibview.api.result.Result` keeps its engine, so its report and
figures reuse the fits and scores).

A top-label run (``confidence=``, ``predictions=``, ``labels=``: the confidence and class of each sample's
prediction, and its true class) becomes an in-memory top-label run (:func:`calibview.core.io.arrays.register_toplabel`)
with the same two splits, so ``rows`` are exactly those of ``calibview metrics --json`` on a file holding the
same vectors as ``/<model>/<dataset>/{fit,test}/{confidence, predictions, labels}`` (docs/FORMAT.md): the
full-vector metrics (NLL, Brier, class-wise ECE, AUROC) are None, and the calibrators that need logits are
skipped with the command line's note.

The module is not called ``evaluate``: importing a submodule sets it as an attribute of its package, and
``calibview.api.evaluate`` would then be this module, not the function.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from calibview.api.result import Result
from calibview.core import calibrators as calib
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.evaluation import defaults
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest, Setting, check_request
from calibview.core.evaluation.toplabel.absent import USABLE_CALIBRATORS, skipped_note, usable_calibrators
from calibview.core.io import arrays

__all__ = ["evaluate"]

#: how messages name the arrays (the parameters as the caller spells them)
LABEL = "calibview.evaluate"
FIT, TEST = "fit", "test"


def _numpy(x: Any, what: str, label: str = LABEL) -> np.ndarray:
    """``x`` as a numpy array without a copy where one is not needed: a CPU tensor shares its memory, a GPU
    tensor is copied to the host once, bfloat16 (which numpy lacks) becomes float32; ``label`` starts the message
    when it is missing (the calling function's name)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy() if t.device.type != "cpu" else t.numpy()
    if x is None:
        raise CalibviewError(f"{label}: {what} is missing; give an (N, K) array of scores and (N,) labels.")
    return np.asarray(x)


def _names(calibrators: Union[str, Sequence[str]]) -> tuple[str, ...]:
    """The calibrator names: a sequence, one name, or a comma-separated string; unknown names refused."""
    items = calibrators.split(",") if isinstance(calibrators, str) else list(calibrators)
    names = tuple(dict.fromkeys(str(c).strip() for c in items if str(c).strip()))
    if not names:
        raise ParameterError("calibrators is empty; give a list such as ['none', 'ts'].", "calibrators")
    for name in names:
        if name not in defaults.KNOWN_CALIBRATORS:
            raise CalibviewError(f"Unknown calibrator {name!r}; choose from {', '.join(defaults.KNOWN_CALIBRATORS)}.")
    return names


def _as_list(value) -> list:
    """A setting given as one value or a list of values (an ablation), as a list without repeats."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise CalibviewError("An ablation list is empty; give at least one value.")
    return list(dict.fromkeys(items))


def _settings(bins, bandwidth, kernel) -> list[Setting]:
    """Every (bins, bandwidth, kernel) of the lists, bins outermost: the command line's ablation grid."""
    out = []
    for b in _as_list(bins):
        b = b.lower() if isinstance(b, str) else b
        for h in _as_list(bandwidth):
            if isinstance(h, bool) or not isinstance(h, (int, float, np.floating, np.integer)):
                raise CalibviewError(f"The bandwidth must be a positive number, not {h!r}.")
            for k in _as_list(kernel):
                out.append(Setting(b, float(h), str(k).lower()))
    return out


def _options(options: Optional[Mapping[str, Mapping[str, Any]]], names: tuple[str, ...]) -> tuple:
    """``{"hb": {"bins": 20}}`` as EvalRequest's nested tuples; options of a calibrator not asked for refused."""
    out = []
    for name, opts in (options or {}).items():
        if name not in names:
            raise ParameterError(f"options for {name!r}, which is not among calibrators ({', '.join(names)}).",
                                 "options")
        if not isinstance(opts, Mapping):
            raise ParameterError(f"options[{name!r}] must be a dict of constructor options, such as "
                                 f"{{'bins': 20}}.", "options")
        calib.configured(name, dict(opts))
        out.append((name, tuple(opts.items())))
    return tuple(out)


def _pair(pair, what: str = "fit") -> tuple:
    """The (scores, labels) pair given as parameter ``what`` (``fit``: the calibrators' arrays)."""
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        role = "the calibrators are fitted on" if what == "fit" else "the conformal quantile is taken on"
        raise ParameterError(f"{what} must be a (scores, labels) pair: the arrays {role}.", what)
    return pair[0], pair[1]


class _Progress:
    """``progress(fraction, message)`` as a tqdm bar (tqdm.auto: a widget in a notebook) when tqdm is installed,
    else one plain line on stderr rewritten in place."""

    def __init__(self) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.bar, self._last = None, -1
        else:
            self.bar = tqdm(total=100, desc="calibview", unit="%", leave=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")

    def __call__(self, fraction: float, message: str) -> None:
        pct = int(round(100 * min(max(fraction, 0.0), 1.0)))
        if self.bar is not None:
            self.bar.update(pct - self.bar.n)
            self.bar.set_postfix_str(message[:60], refresh=False)
        elif pct != self._last:
            self._last = pct
            sys.stderr.write(f"\rcalibview: {pct:3d}% {message[:70]:70s}")
            sys.stderr.flush()

    def close(self) -> None:
        """End the bar (or the line)."""
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _binary(kind: str, scores):
    """A binary model's (N,) or (N, 1) scores of class 1 as the (N, 2) class columns: logits z as [0, z],
    probabilities p (``probs=True``) as [1 - p, p], as ``calibview import`` stores them; other arrays unchanged."""
    from calibview.core.io.importers import binary_columns

    return binary_columns(kind, scores, binary=kind)[1]


#: how messages name a top-label run's vectors, per split (the parameters as the caller spells them)
TOPLABEL_NAMES = {TEST: ("confidence", "predictions", "labels"), FIT: ("fit[0]", "fit[1]", "fit[2]")}


def _check_toplabel_args(scores, confidence, predictions, labels, fit, probs, members) -> None:
    """One sentence for a top-label call that mixes in logits' arguments or lacks one of its three vectors."""
    if scores is not None:
        raise ParameterError("Give either scores (logits or probabilities, with labels) or confidence and "
                             "predictions (a top-label run, with labels), not both.", "scores")
    if members is not None:
        raise ParameterError("members are (M, N, K) logits, which a top-label run does not have; give members "
                             "without confidence and predictions.", "members")
    if probs:
        raise ParameterError("probs=True describes scores, but a top-label run's confidence is already the "
                             "probability of the predicted class; drop probs.", "probs")
    for value, name in ((confidence, "confidence"), (predictions, "predictions"), (labels, "labels")):
        if value is None:
            raise ParameterError(f"{LABEL}: {name} is missing; a top-label run needs confidence, predictions and "
                                 f"labels, one value per sample.", name)
    if fit is not None and not (isinstance(fit, (tuple, list)) and len(fit) == 3):
        raise ParameterError("fit must be a (confidence, predictions, labels) triple for a top-label run: the "
                             "arrays the calibrators are fitted on.", "fit")
    for i, value in enumerate(fit or ()):
        if value is None:
            raise ParameterError(f"{LABEL}: fit[{i}] is missing; fit of a top-label run is a (confidence, "
                                 f"predictions, labels) triple of one value per sample.", "fit")


def _toplabel_run(confidence, predictions, labels, fit, num_classes, class_names, meta, model, dataset):
    """The in-memory top-label run of the test vectors and, when given, the fit triple."""
    splits = {}
    if fit is not None:
        splits[FIT] = tuple(_numpy(a, f"fit[{i}]") for i, a in enumerate(fit))
    splits[TEST] = (_numpy(confidence, "confidence"), _numpy(predictions, "predictions"), _numpy(labels, "labels"))
    return arrays.register_toplabel(model, dataset, splits, num_classes=num_classes, label=LABEL,
                                    names=TOPLABEL_NAMES, class_names=class_names,
                                    meta={TEST: meta} if meta else None)


def _toplabel_names(run, names: tuple[str, ...]) -> tuple[str, ...]:
    """The calibrators a top-label run takes, the others skipped with the command line's note; refused when none
    is left."""
    usable, skipped = usable_calibrators(run.info, names)
    if skipped and not usable:
        raise ParameterError(f"{', '.join(skipped)} need logits or the probabilities of every class, and a top-label "
                             f"run stores only the confidence of the predicted class; choose from "
                             f"{', '.join(USABLE_CALIBRATORS)}.", "calibrators")
    if skipped:
        logging.getLogger("calibview").warning(skipped_note(run.info, skipped))
    return usable


def evaluate(scores=None, labels=None, *, fit=None, confidence=None, predictions=None,
             num_classes: Optional[int] = None, probs: bool = False,
             calibrators: Union[str, Sequence[str]] = ("none",), bins: Union[int, str, Sequence] = 15,
             bandwidth: Union[float, Sequence[float]] = 0.05, kernel: Union[str, Sequence[str]] = "gaussian",
             n_boot: int = 1000, seed: int = 0, level: float = 0.95, device: str = "auto",
             options: Optional[Mapping[str, Mapping[str, Any]]] = None, progress: bool = False,
             class_names: Optional[Sequence[str]] = None, meta: Optional[Mapping[str, Any]] = None,
             model: str = "model", dataset: str = "data", members=None,
             members_kind: str = "ensemble") -> Result:
    """Evaluate the calibration of ``scores`` against ``labels``, with calibrators fitted on ``fit``.

    scores : (N, K) logits, or probabilities with ``probs=True``; numpy or torch, float16, float32 or float64
        (float32 and float64 are used in place, never copied to float64; float16 is widened to float32). A binary
        model's (N,) or (N, 1) scores of class 1 become the two columns [0, z] (logits) or [1 - p, p] (probs).
    labels : (N,) integer class indices 0..K-1.
    fit : a (scores (N_fit, K), labels (N_fit,)) pair of held-out arrays, the same kind as ``scores``; required
        for any calibrator other than ``none``. For a top-label run a (confidence, predictions, labels) triple of
        (N_fit,) vectors.
    confidence, predictions : instead of ``scores``, a top-label run (with ``labels``): (N,) float confidence in
        [0, 1] (the probability of the predicted class; NaN and infinities refused) and (N,) integer predicted
        classes; numpy or torch. ``num_classes`` gives K (else the number of ``class_names``, else unknown:
        predictions and labels must then only be >= 0), and predictions and labels must lie in [0, K). Every metric
        that needs only the top label is computed from these confidences (for logits z given as
        ``calibview.core.io.toplabel.write.from_scores(z)``, accuracy and the uncalibrated ECE equal those of
        ``scores=z``); NLL, Brier, class-wise ECE and AUROC are None. Only ``none``, ``hb``, ``ir``, ``platt`` and
        ``beta`` (fitted on the binary problem (confidence, prediction correct)) apply: the others are skipped
        with a warning, as the command line skips them, and refused when none is left. ``scores``, ``members``
        or ``probs=True`` beside them is refused in one sentence, as is ``num_classes`` beside ``scores``.
    calibrators : names (``none``, ``ts``, ``ts-grid``, ``hb``, ``ir``, ``platt``, ``beta``, ``mrr``, ``vs``,
        ``ms``, ``dirichlet``); ``options`` their constructor options, ``{"hb": {"bins": 20}}``.
    bins, bandwidth, kernel : the binned metrics' bin count (or "auto"), the kernel bandwidth (confidence units)
        and kernel of CAL and the diagram; a list gives one row per combination (an ablation, bins outermost).
    n_boot, seed, level : bootstrap resamples per interval (0: none), their seed, the interval level in (0, 1).
    device : "auto" (CUDA when available), "cpu" or "cuda".
    progress : show a progress bar (tqdm if installed, else a plain line on stderr).
    class_names : K strings; meta : ``{column: (N,) values}`` of the test samples (metadata columns).
    model, dataset : the run's name in the records ("model/data").
    members : (M, N, K) logits of M ensemble members (``members_kind="ensemble"``) or MC-dropout passes
        (``"mc-dropout"``) of the test samples; the prediction is then their ensemble (the mean of the member
        probabilities), ``scores`` may be None (given, they are the "deterministic" row), ``fit`` then takes the
        (M, N_fit, K) members of the fit samples, and the rows hold the ensemble and each member
        (``member`` "ensemble", "0", ...); ``result.uncertainty`` is the per-sample entropy split.

    Returns a :class:`~calibview.api.result.Result`. Bad input raises :class:`calibview.CalibviewError` with the
    one-sentence message the file reader gives for the same problem."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)):
        raise ParameterError(f"n_boot must be a whole number of resamples, not {n_boot!r}.", "n_boot")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be a whole number, not {seed!r}.", "seed")
    names = _names(calibrators)
    toplabel = confidence is not None or predictions is not None
    if toplabel:
        _check_toplabel_args(scores, confidence, predictions, labels, fit, probs, members)
        return _evaluate_toplabel(confidence, predictions, labels, fit=fit, num_classes=num_classes, names=names,
                                  settings=_settings(bins, bandwidth, kernel), options=options, n_boot=n_boot,
                                  seed=seed, level=level, device=device, progress=progress,
                                  class_names=class_names, meta=meta, model=model, dataset=dataset)
    if num_classes is not None:
        raise ParameterError("num_classes is for a top-label run (confidence=, predictions=, labels=); scores give K "
                             "as their number of columns.", "num_classes")
    kind = "probs" if probs else "logits"
    splits, pretty, held = {}, {}, {}
    if fit is not None:
        fs, fl = _pair(fit)
        fs = _numpy(fs, "fit[0]")
        if members is not None and fs.ndim == 3:        # the fit samples' members
            held[FIT] = (members_kind, fs)
            splits[FIT] = (kind, None, _numpy(fl, "fit[1]"))
        else:
            splits[FIT] = (kind, _binary(kind, fs), _numpy(fl, "fit[1]"))
        pretty[FIT] = ("fit[0]", "fit[1]")
    if members is not None:
        held[TEST] = (members_kind, _numpy(members, "members"))
    own = None if (members is not None and scores is None) else _binary(kind, _numpy(scores, "scores"))
    splits[TEST] = (kind, own, _numpy(labels, "labels"))
    pretty[TEST] = ("scores", "labels")
    needing = [c for c in names if c != "none"]
    if needing and fit is None:
        raise ParameterError(f"Calibrators other than 'none' ({', '.join(needing)}) need fit=(scores, labels), the "
                             f"held-out arrays they are fitted on.", "fit")
    settings = _settings(bins, bandwidth, kernel)
    opts = _options(options, names)
    run = arrays.register(model, dataset, splits, label=LABEL, names=pretty, class_names=class_names,
                          meta={TEST: meta} if meta else None, members=held or None)
    binary = [c for c in names if calib.get(c).binary_only]
    if binary and run.info.k != 2:          # as the command line does: skipped with a warning
        names = tuple(c for c in names if c not in binary)
        if not names:
            raise ParameterError(f"{', '.join(binary)} calibrate binary problems only (K = 2), but the scores have "
                                 f"K = {run.info.k} classes; choose other calibrators.", "calibrators")
        logging.getLogger("calibview").warning(f"run {run.info.name} has K = {run.info.k} classes: skipping "
                                               f"{', '.join(binary)} (binary problems only).")
    return _run(run, names, settings, opts, fit is not None, n_boot=n_boot, seed=seed, level=level, device=device,
                progress=progress, members=members)


def _evaluate_toplabel(confidence, predictions, labels, *, fit, num_classes, names, settings, options, n_boot,
                       seed, level, device, progress, class_names, meta, model, dataset) -> Result:
    """:func:`evaluate` of a top-label run (arguments checked by :func:`_check_toplabel_args`)."""
    opts = _options(options, names)
    run = _toplabel_run(confidence, predictions, labels, fit, num_classes, class_names, meta, model, dataset)
    names = _toplabel_names(run, names)
    opts = tuple((n, o) for n, o in opts if n in names)
    needing = [c for c in names if c != "none"]
    if needing and fit is None:
        raise ParameterError(f"Calibrators other than 'none' ({', '.join(needing)}) need fit=(confidence, "
                             f"predictions, labels), the held-out vectors they are fitted on.", "fit")
    return _run(run, names, settings, opts, fit is not None, n_boot=n_boot, seed=seed, level=level, device=device,
                progress=progress, members=None)


def _run(run, names, settings, opts, has_fit: bool, *, n_boot, seed, level, device, progress, members) -> Result:
    """The request of the in-memory ``run`` (test split, fit split when ``has_fit``), every setting checked before
    any work, evaluated by a fresh engine."""
    first = settings[0]
    req = EvalRequest(file=run.path, run=run.info.name, eval_split=TEST, fit_split=FIT if has_fit else None,
                      calibrators=names, bins=first.bins, n_boot=n_boot, seed=seed, level=level,
                      bandwidth=first.bandwidth, kernel=first.kernel, device=device, options=opts)
    for s in settings:                  # every setting refused before any work, as the command line does
        check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
    engine = Engine()
    bar = _Progress() if progress else None
    rows = [req]
    if members is not None:
        from calibview.core.evaluation.members.requests import member_requests

        rows = member_requests(req, run.info)
    try:
        evaluations = engine.evaluate_settings(req, settings, progress=bar)
        others = [ev for r in rows[1:] for ev in engine.evaluate_settings(r, settings)]
    finally:
        if bar is not None:
            bar.close()
    return Result(evaluations, engine=engine, run=run, settings=settings, members=others)
