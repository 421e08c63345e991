"""Which calibrator of a calibrators.json ``apply`` may use on a run, and the fields every record carries.

A report's calibrators.json is a list of records, each stamped ``"schema": "calibview.calibrators/1"`` (files
written before the schema existed are accepted with a warning); a single calibrator's JSON (``Fitted.to_json``) is
one such record without run. The record must have been fitted on the target run (``allow_other_run`` turns that
into a warning), with the run's K and, where both are known, its class names. Every message names the file.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from calibview.core.errors import CalibviewError

SCHEMA = "calibview.calibrators/1"
#: the ``kind`` of the records of regression recalibrators (calibview.core.regression.records)
REGRESSION = "regression"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def load_json(path: str, what: str = "a calibrators JSON",
              hint: str = "give the calibrators.json written by calibview report") -> Any:
    """The JSON in ``path``; a missing file, a FIFO, device or folder, an HDF5 or other binary file, bad JSON or an
    object with a key twice is one sentence naming it (``what`` the file should have been, ``hint`` what to give
    instead)."""
    raw = read_regular(path, what, hint)
    if raw.startswith(_HDF5_SIGNATURE) or raw[512:520] == _HDF5_SIGNATURE:
        raise CalibviewError(f"{path} is an HDF5 file, not {what}; {hint} (check the order of the arguments).")
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise CalibviewError(f"{path} has the key {e.args[0]!r} twice in one object, and JSON parsers differ in "
                             f"which one they keep; {hint}.") from None
    except UnicodeDecodeError:
        raise CalibviewError(f"{path} is a binary file, not {what}; {hint}.") from None
    except (json.JSONDecodeError, RecursionError) as e:
        line = f" (line {e.lineno})" if isinstance(e, json.JSONDecodeError) else ""
        raise CalibviewError(f"{path} is not valid JSON{line}; {hint}.") from None


class _DuplicateKey(ValueError):
    """A JSON object names one key twice (args[0]: the key)."""


def _unique_keys(pairs: list) -> dict:
    """json's object_pairs_hook: the object as a dict, refusing a key that occurs twice (the last one would win
    silently, while another parser may keep the first)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_regular(path: str, what: str, hint: str) -> bytes:
    """The bytes of ``path`` when it is a regular file; a FIFO, socket, device or folder is refused without being
    read (reading a FIFO would wait for a writer forever), a missing or unreadable file is one sentence."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise CalibviewError(f"Cannot read {path}: {e.strerror or e}.") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CalibviewError(f"{path} is not a regular file (a FIFO, device or folder), so it is not read as "
                                 f"{what}; {hint}.")
        chunks = []
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                return b"".join(chunks)
            chunks.append(block)
    except OSError as e:
        raise CalibviewError(f"Cannot read {path}: {e.strerror or e}.") from None
    finally:
        os.close(fd)


def schema_warnings(path: str, records: Sequence[Mapping]) -> list[str]:
    """The warnings of records without a schema; CalibviewError for a schema this calibview does not know."""
    schemas = {r.get("schema") for r in records}
    unknown = sorted(str(s) for s in schemas - {SCHEMA, None})
    if unknown:
        raise CalibviewError(f"{path} has schema {unknown[0]!r}, which this calibview does not know (it reads "
                             f"{SCHEMA}); update calibview or re-run the report.")
    if None in schemas:
        return [f"{path} has no schema (written by an older calibview); it is read as {SCHEMA}, so re-run the "
                f"report to check it against its run"]
    return []


def records_of(path: str, obj: Any) -> tuple[list[dict], bool]:
    """(the records of a calibrators file's JSON ``obj``, whether it was a single record); one sentence for
    anything else."""
    if isinstance(obj, dict):
        return [obj], True
    if isinstance(obj, list) and obj and all(isinstance(e, dict) for e in obj):
        return obj, False
    raise CalibviewError(f"{path} is not a calibview calibrators file (expected a list of calibrator records "
                         f"or one calibrator's JSON).")


def choose(path: str, obj: Any, run, use: Optional[str] = None, *,
           allow_other_run: bool = False) -> tuple[dict, list[str]]:
    """(the calibrator record to apply to ``run`` (a RunInfo), warnings)."""
    records, single = records_of(path, obj)
    warnings = schema_warnings(path, records)
    # a report on a file with regression runs lists their recalibrators too: they are not candidates here
    regression = [r for r in records if r.get("kind") == REGRESSION]
    records = [r for r in records if r.get("kind") != REGRESSION]
    if not records:
        methods = ", ".join(dict.fromkeys(str(r.get("method")) for r in regression))
        raise CalibviewError(f"{path} holds only recalibrators fitted on regression runs ({methods}), and run "
                             f"{run.name} in {run.file} is a classification run; apply a calibrator fitted on a "
                             "classification run.")
    if any("method" not in r or "k" not in r for r in records):
        raise CalibviewError(f"{path} is not a calibview calibrators file (a record has no 'method' and 'k').")
    for_run = [r for r in records if r.get("run") == run.name]
    if not for_run:
        runs = sorted({str(r["run"]) for r in records if "run" in r})
        if single and not runs:
            for_run = records                        # one calibrator without a run: K and class names still count
        elif len(runs) == 1 and allow_other_run:
            warnings.append(f"{path} was fitted on run {runs[0]}, not {run.name}; applied anyway (--allow-other-run)")
            for_run = records
        else:
            hint = ("; pass --allow-other-run to apply it to this run when K and class names match"
                    if len(runs) == 1 else "; pass one of those with --run")
            raise CalibviewError(f"{path} has no calibrator fitted on run {run.name} (it has runs: "
                                 f"{', '.join(runs) or 'none'}){hint}.")
    chosen = pick(path, for_run, use)
    _check_target(path, chosen, run)
    return chosen, warnings


def pick(path: str, for_run: list[dict], use: Optional[str]) -> dict:
    """The record of ``for_run`` (one run's records) named ``use``, or without it the only one that is not
    "none"; otherwise one sentence listing the names."""
    names = sorted({str(r.get("calibrator", r.get("method"))) for r in for_run})
    if use:
        chosen = [r for r in for_run if r.get("calibrator", r.get("method")) == use]
        if not chosen:
            raise CalibviewError(f"{path} has no calibrator named {use!r} for run {for_run[0].get('run')}; "
                                 f"available: {', '.join(names)}.")
        return chosen[0]
    chosen = [r for r in for_run if r.get("method") != "none"]
    if len(chosen) != 1:
        raise CalibviewError(f"{path} holds {len(chosen)} fitted calibrators for run {for_run[0].get('run')}; "
                             f"pick one with --use (available: {', '.join(names)}).")
    return chosen[0]


def _check_target(path: str, record: Mapping, run) -> None:
    try:
        k = int(record["k"])
    except (TypeError, ValueError):
        raise CalibviewError(f"{path}: the calibrator's 'k' is {record['k']!r}, not a class count.") from None
    top = ((record.get("fit") or {}).get("form") == "top-label")
    run_top = all(s.kind == "top-label" for s in run.splits)
    if record.get("method") == "none":          # the identity applies to either form
        top = run_top
    if top != run_top:
        what = "a top-label run (the predicted class's confidence)" if top else "every class's scores"
        raise CalibviewError(f"The calibrator in {path} was fitted on {what}, and run {run.name} in {run.file} is "
                             f"{'not ' if top else ''}a top-label run; apply it to a run of the form it was "
                             f"fitted on.")
    if not top and k != run.k:
        raise CalibviewError(f"The calibrator in {path} was fitted on K = {k} classes but run {run.name} in "
                             f"{run.file} has K = {run.k}.")
    names = record.get("class_names")
    if names is not None and run.class_names is not None and tuple(map(str, names)) != tuple(run.class_names):
        diff = next(i for i, (a, b) in enumerate(zip(map(str, names), run.class_names)) if a != b)
        raise CalibviewError(f"The calibrator in {path} was fitted on other class names than run {run.name} in "
                             f"{run.file} (class {diff}: {names[diff]!r} against {run.class_names[diff]!r}).")


def record_fields(run) -> dict:
    """What :func:`calibview.core.reports.tables.calibrators_json` stamps on every record of ``run`` (a RunInfo):
    the schema and the run's class names (if any)."""
    out: dict = {"schema": SCHEMA}
    if run.class_names is not None:
        out["class_names"] = list(run.class_names)
    return out

