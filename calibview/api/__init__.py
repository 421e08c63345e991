"""The Python API for notebooks and scripts, on arrays: ``evaluate`` and its :class:`Result` (``evaluation``,
``result``), the evaluation of a file or of shards, on this process or a Dask cluster (``files``), conformal
prediction sets (``conformal_sets``), one-off metric functions (``metrics``), scikit-learn-style calibrators
(``calibrators``) and logits collected from a torch model (``collect``). ``import calibview`` exposes these names
lazily (``calibview.ece``, ``calibview.evaluate``, ...), so importing the package costs no torch until one is
used.

This layer sits beside the command line and the window: it uses the core and the figures, and nothing below
imports it."""

#: public name -> the submodule of calibview.api that defines it, or a full module path (resolved on first use)
EXPORTS: dict[str, str] = {
    "evaluate": "evaluation",
    "evaluate_file": "files",
    "Result": "result",
    "conformal": "conformal_sets",
    "ConformalResult": "conformal_sets",
    "CalibviewError": "calibview.core.errors",
    "accuracy": "metrics",
    "nll": "metrics",
    "brier": "metrics",
    "ece": "metrics",
    "mce": "metrics",
    "rmsce": "metrics",
    "ace": "metrics",
    "classwise_ece": "metrics",
    "debiased_ece": "metrics",
    "smece": "metrics",
    "cal_tot": "metrics",
    "CalTot": "metrics",
    "aurc": "metrics",
    "auroc": "metrics",
    "reliability": "metrics",
    "ReliabilityTable": "metrics",
    "sharpness_curve": "metrics",
    "calibrator": "calibrators",
    "load_calibrator": "calibrators",
    "Calibrator": "calibrators",
    "Uncalibrated": "calibrators",
    "TemperatureScaling": "calibrators",
    "GridTemperatureScaling": "calibrators",
    "VectorScaling": "calibrators",
    "MatrixScaling": "calibrators",
    "DirichletCalibration": "calibrators",
    "HistogramBinning": "calibrators",
    "IsotonicCalibration": "calibrators",
    "PlattScaling": "calibrators",
    "BetaCalibration": "calibrators",
    "MRR": "calibrators",
    "collect_logits": "collect",
}


def __getattr__(name: str):
    if name.startswith("__") or name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    where = EXPORTS[name]
    return getattr(importlib.import_module(where if "." in where else f"{__name__}.{where}"), name)


def __dir__():
    return sorted(list(globals()) + list(EXPORTS))
