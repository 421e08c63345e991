"""The two column layouts a CSV table may have, recognised from its header (names compared without case or
surrounding blanks):

- top-label: a label column (``label``, ``true_label``, ``y``, ``target``), a prediction column
  (``prediction``, ``pred_label``, ``pred``, ``y_pred``) and a confidence column (``confidence``, ``conf``,
  ``score``, ``prob``), any of them named explicitly instead;
- per class: the label column and one column per class, ``p_0 .. p_{K-1}`` or ``prob_<class>`` (probabilities)
  or ``logit_<class>`` (logits); the ``<class>`` names become the run's class names.

An optional ``split`` column assigns each row to a split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from calibview.core.errors import CalibviewError

LABEL_NAMES = ("label", "true_label", "y", "target")
PRED_NAMES = ("prediction", "pred_label", "pred", "y_pred")
CONF_NAMES = ("confidence", "conf", "score", "prob")
SPLIT_NAME = "split"
_CLASS = re.compile(r"^(p|prob|logit)_(.+)$")


@dataclass(frozen=True)
class Layout:
    """Which column holds what: ``form`` "top-label" (``pred``, ``conf``) or "classes" (``classes``, the column
    of each class in order, ``kind`` "probs" or "logits", ``class_names`` or None for ``p_<i>``); ``label`` and
    ``split`` (or None) in both."""

    form: str
    label: int
    split: Optional[int]
    pred: int = -1
    conf: int = -1
    classes: tuple[int, ...] = ()
    kind: str = ""
    class_names: Optional[tuple[str, ...]] = None


def _find(header: list[str], wanted: Sequence[str]) -> Optional[int]:
    for name in wanted:
        if name in header:
            return header.index(name)
    return None


def _named(file: str, header: list[str], raw: Sequence[str], name: str, flag: str) -> int:
    key = name.strip().lower()
    if key not in header:
        raise CalibviewError(f"{file}: {flag} {name} names no column of the table (its columns are "
                             f"{', '.join(raw)}).")
    return header.index(key)


def _missing(file: str, raw: Sequence[str], what: str, names: Sequence[str], flag: str) -> CalibviewError:
    return CalibviewError(f"{file}: no {what} column found (looked for {', '.join(names)}); the table's columns are "
                          f"{', '.join(raw) or 'none'}, so name it with {flag} or rename it.")


def guess(file: str, raw: Sequence[str], *, label_col: Optional[str] = None, pred_col: Optional[str] = None,
          conf_col: Optional[str] = None) -> Layout:
    """The :class:`Layout` of a table whose header is ``raw``; a column that cannot be found is one sentence naming
    the columns the table has and the flag that names it."""
    header = [h.strip().lower() for h in raw]
    label = (_named(file, header, raw, label_col, "--label-col") if label_col else _find(header, LABEL_NAMES))
    if label is None:
        raise _missing(file, raw, "label", LABEL_NAMES, "--label-col")
    split = header.index(SPLIT_NAME) if SPLIT_NAME in header else None
    matches = [(i, _CLASS.match(h)) for i, h in enumerate(header)]
    classes = [(i, m.group(1), raw[i].strip()[len(m.group(1)) + 1:]) for i, m in matches if m]
    if classes and not (pred_col or conf_col):
        prefixes = sorted({p for _, p, _ in classes})
        if len(prefixes) > 1:
            raise CalibviewError(f"{file}: the table mixes class columns of kinds {', '.join(p + '_' for p in prefixes)}; "
                                 f"give one probability or logit column per class, all named alike.")
        prefix = prefixes[0]
        names = [n for _, _, n in classes]
        if prefix == "p":
            want = [str(i) for i in range(len(names))]
            if sorted(names, key=lambda s: (len(s), s)) != want:
                raise CalibviewError(f"{file}: the p_<i> columns must be p_0 to p_{len(names) - 1}, one per class, "
                                     f"but they are {', '.join('p_' + n for n in names)}.")
            order = sorted(classes, key=lambda c: int(c[2]))
            return Layout("classes", label, split, classes=tuple(i for i, _, _ in order), kind="probs")
        if len(set(names)) != len(names):
            raise CalibviewError(f"{file}: two class columns have the same class name; each class needs one column.")
        if len(names) < 2:
            raise CalibviewError(f"{file}: the table has one class column ({raw[classes[0][0]].strip()}) but a "
                                 f"classifier needs at least 2 class columns.")
        return Layout("classes", label, split, classes=tuple(i for i, _, _ in classes),
                      kind="probs" if prefix == "prob" else "logits", class_names=tuple(names))
    pred = _named(file, header, raw, pred_col, "--pred-col") if pred_col else _find(header, PRED_NAMES)
    if pred is None:
        raise _missing(file, raw, "prediction", PRED_NAMES, "--pred-col")
    conf = _named(file, header, raw, conf_col, "--conf-col") if conf_col else _find(header, CONF_NAMES)
    if conf is None:
        raise _missing(file, raw, "confidence", CONF_NAMES, "--conf-col")
    return Layout("top-label", label, split, pred=pred, conf=conf)
