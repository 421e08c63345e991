"""``calibview apply CALIBRATOR FILE --run R --split S -o OUT``: a fitted calibrator (a report's calibrators.json,
one calibrator's JSON, or a release's inference_config.json) applied to a split; its probabilities are written
as a new run of OUT. On a regression run the regression recalibrator is applied instead
(:mod:`calibview.cli.regression.apply`): its recalibrated predictive is written as a regression run of OUT."""

from __future__ import annotations

import argparse
import logging
from typing import Optional

from calibview.cli.options import add_input_options, add_lock_options
from calibview.core.errors import CalibviewError

HELP = "apply a fitted calibrator (JSON) to a split and write its probabilities (regression runs: its predictive)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The calibrator file, the data, the run and split, and the output."""
    p.add_argument("calibrator", help="calibrators.json of a report, one calibrator's JSON, or the "
                                      "inference_config.json of a release")
    p.add_argument("file", help="HDF5 file to calibrate (logits, probabilities or a regression run)")
    p.add_argument("--run", required=True, metavar="MODEL/DATASET")
    p.add_argument("--split", required=True)
    p.add_argument("--calibrator-name", "--use", dest="use", default=None,
                   help="which calibrator of a report's calibrators.json (default: the only non-'none' one of the "
                        "run)")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None, help="model name in the output (default: MODEL+CALIBRATOR)")
    p.add_argument("--overwrite", action="store_true", help="replace the split if OUT already has it")
    p.add_argument("--allow-other-run", action="store_true",
                   help="apply a calibrator fitted on another run (a warning; K and class names must match)")
    p.add_argument("--allow-crossing", action="store_true",
                   help="regression runs: sort the quantiles of rows where they cross instead of refusing the run")
    add_input_options(p)
    add_lock_options(p)


def load_calibrator(path: str, run, use: Optional[str], allow_other_run: bool = False):
    """One calibrator from a JSON file: a single calibrator, a report's list (picked by run and name; the schema,
    run, K and class names are checked by calibview.core.calibrators.file), or a verified inference config (its run
    must be ``run``)."""
    from calibview.core import calibrators as calib
    from calibview.core.calibrators import file as calibrator_file

    obj = calibrator_file.load_json(           # a missing, binary or HDF5 file is one sentence naming it
        path, "a calibrators JSON or inference config",
        "give the calibrators.json of calibview report or the inference_config.json of calibview release")
    if isinstance(obj, dict) and "schema" in obj and obj["schema"] != calibrator_file.SCHEMA:
        from calibview.core.release import config as rel       # an inference config of calibview release

        config = rel.verify_config(obj, path)
        if rel.run_name(config) != run.name:
            raise CalibviewError(f"{path} was released for run {rel.run_name(config)}, not {run.name}; apply it to "
                                 "the run of the same model.")
        return rel.calibrator_of(config)
    record, warnings = calibrator_file.choose(path, obj, run, use, allow_other_run=allow_other_run)
    for w in warnings:
        logging.getLogger("calibview").warning(f"warning: {w}")
    try:
        return calib.from_json(record)
    except CalibviewError as e:
        raise CalibviewError(f"{path}: {str(e)[0].lower()}{str(e)[1:]}") from None


def run(args) -> int:
    """Calibrate the split chunk by chunk and write its probabilities (float64) with the labels and class names."""
    import numpy as np
    import torch

    from calibview.core.io import discovery, writer
    from calibview.core.io import logits as lg
    from calibview.core.evaluation.tensors import scores_tensor
    from calibview.core.stats.metrics import chunk_rows

    from calibview.core.io.safe_io import refuse_overwriting_inputs
    from calibview.core.io.toplabel import format as tf

    refuse_overwriting_inputs([args.out], [args.file, args.calibrator])
    from calibview.cli.regression import apply as regression

    target = regression.regression_target(args.file, args.run)
    if target is not None:
        return regression.run(args, target)
    info = discovery.find_run(args.file, args.run)
    fitted = load_calibrator(args.calibrator, info, args.use, args.allow_other_run)
    if info.split(args.split).kind == tf.KIND or _is_toplabel(fitted):
        return _apply_toplabel(args, info, fitted)
    data = lg.read_split(args.file, info, args.split)
    if data.scores.shape[1] != fitted.k:
        raise CalibviewError(f"The calibrator in {args.calibrator} was fitted on K = {fitted.k} classes but "
                             f"{info.name}/{args.split} in {args.file} has K = {data.scores.shape[1]}.")
    scores = scores_tensor(data)          # no copy of logits; probabilities become log-probabilities
    probs = np.empty(scores.shape, dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, scores.shape[0], rows := chunk_rows(scores.shape[1])):
            probs[start:start + rows] = fitted.apply(scores[start:start + rows]).exp().numpy()
    model = args.model or f"{info.model}+{fitted.method}"
    attrs = {"calibrated_from": f"{args.file}:{info.path}/{args.split}", "calibrator": fitted.method}
    writer.write_run(args.out, model, info.dataset or "data", args.split, probs=probs, labels=data.labels,
                     class_names=info.class_names, attrs=attrs, overwrite=args.overwrite)
    print(f"{args.out}: {model}/{info.dataset or 'data'}/{args.split} (N={probs.shape[0]}, K={probs.shape[1]}, "
          f"{fitted.label})")
    return 0


def _is_toplabel(fitted) -> bool:
    """Whether ``fitted`` was fitted on a top-label run (the confidence's binary problem)."""
    from calibview.core.calibrators.toplabel import FORM

    return (fitted.fit_info or {}).get("form") == FORM


def _apply_toplabel(args, info, fitted) -> int:
    """A top-label calibrator on a top-label split: the calibrated confidence (float64) is written as a top-label
    run of OUT with the same predictions and labels. Either without the other is one sentence."""
    import numpy as np
    import torch

    from calibview.core.calibrators.toplabel import calibrated_confidence
    from calibview.core.io.toplabel.read import read_toplabel
    from calibview.core.io.toplabel.write import write_toplabel

    where = f"{info.name}/{args.split} in {args.file}"
    if info.split(args.split).kind != "top-label":
        raise CalibviewError(f"The calibrator in {args.calibrator} was fitted on a top-label run (it maps the "
                             f"predicted class's confidence), but {where} holds every class's scores; apply a "
                             f"calibrator fitted on logits or probabilities.")
    if not _is_toplabel(fitted) and fitted.method != "none":
        raise CalibviewError(f"{where} is a top-label run (only the predicted class's confidence), but the "
                             f"calibrator in {args.calibrator} ({fitted.label}) was fitted on every class's scores; "
                             f"apply a calibrator fitted on a top-label run.")
    data = read_toplabel(args.file, info, args.split)
    with torch.inference_mode():
        conf = calibrated_confidence(fitted, torch.from_numpy(np.array(data.confidence))).numpy()
    model = args.model or f"{info.model}+{fitted.method}"
    attrs = {"calibrated_from": f"{args.file}:{info.path}/{args.split}", "calibrator": fitted.method}
    write_toplabel(args.out, model, info.dataset or "data", {args.split: (np.clip(conf, 0.0, 1.0),
                                                                         data.predictions, data.labels)},
                   num_classes=info.k or None, class_names=info.class_names, attrs=attrs,
                   overwrite=args.overwrite)
    print(f"{args.out}: {model}/{info.dataset or 'data'}/{args.split} (N={conf.shape[0]}, top-label, "
          f"{fitted.label})")
    return 0
