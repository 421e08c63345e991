"""Build calibview/resources/demo.h5, the bundled demo file, from the real CIFAR logits described in calibview/resources/DEMO_SOURCES.md,
and two regression runs fitted here on scikit-learn's bundled diabetes data (no download).

    python resources/build_demo.py [SOURCE_DIR]     # default SOURCE_DIR: ../shared/data next to the repository

The output is deterministic: building twice from the same sources (and the same scikit-learn) gives
byte-identical files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from calibview.core.io.discovery import list_runs  # noqa: E402
from calibview.core.io.members.format import stack_members  # noqa: E402
from calibview.core.io.members.write import write_members  # noqa: E402
from calibview.core.io.regression.discovery import list_regression_runs  # noqa: E402
from calibview.core.io.regression.write import write_regression  # noqa: E402
from calibview.core.io.writer import write_splits  # noqa: E402

DEFAULT_SOURCE = REPO.parent / "shared" / "data"
OUTPUT = REPO / "calibview" / "resources" / "demo.h5"

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100_CLASSES = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle",
    "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle",
    "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur",
    "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard",
    "lamp", "lawn_mower", "leopard", "lion", "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain",
    "mouse", "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket",
    "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider",
    "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television", "tiger",
    "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman", "worm",
)

_ORIGIN = ('the pretrained ResNet-110 models of Mukhoti et al. 2020, "Calibrating Deep Neural Networks using Focal '
           'Loss" (NeurIPS 2020); logits published in the GitHub repository AIgen/df-posthoc-calibration '
           "(MIT licence, Copyright (c) 2021 AIgen), commit 2e41ac939f23e5b20d2910000d887ba33c3af402, ")
_DIABETES = ("scikit-learn's bundled diabetes data (sklearn.datasets.load_diabetes: 442 patients, 10 baseline "
             "variables, target a measure of disease progression one year later; Efron, Hastie, Johnstone & "
             "Tibshirani 2004, \"Least Angle Regression\", Annals of Statistics 32(2)), ")
ROOT_ATTRIBUTION = ("Logits of " + _ORIGIN + "data/{cifar10,focal_cifar10,cifar100}_resnet110/; the regression runs "
                    "are models fitted by resources/build_demo.py on " + _DIABETES.rstrip(", "))

# (model, dataset, source file, directory in the upstream repository, training loss, class names)
RUNS = (
    ("resnet110-brier", "cifar10", "mukhoti_brier_cifar10_resnet110.npz", "cifar10_resnet110", "Brier",
     CIFAR10_CLASSES),
    ("resnet110-flsd53", "cifar10", "mukhoti_flsd53_cifar10_resnet110.npz", "focal_cifar10_resnet110",
     "adaptive focal loss (FLSD-53)", CIFAR10_CLASSES),
    ("resnet110-brier", "cifar100", "mukhoti_brier_cifar100_resnet110.npz", "cifar100_resnet110", "Brier",
     CIFAR100_CLASSES),
)
SPLITS = ("val", "test")

# the 2-member ensemble of the two CIFAR-10 runs: the same images and labels in val and test
ENSEMBLE = ("resnet110-ensemble", "cifar10", ("mukhoti_brier_cifar10_resnet110.npz",
                                             "mukhoti_flsd53_cifar10_resnet110.npz"))


# the regression runs: a fixed permutation of the 442 patients into a train part (the models' fit only), val and test
DIABETES_SEED = 0
DIABETES_PARTS = {"train": 182, "val": 130, "test": 130}
QUANTILE_LEVELS = tuple(round(i / 20, 2) for i in range(1, 20))       # 0.05, 0.1, ..., 0.95


def _stable(x: np.ndarray) -> np.ndarray:
    """The predictions rounded to 1e-6 (target units; the targets are whole numbers 25 ... 346), so that the last
    bits of a BLAS or a platform's floating point do not change the file's bytes."""
    return np.round(np.asarray(x, dtype=np.float64), 6)


def regression_splits() -> dict[str, tuple[dict, dict]]:
    """The two diabetes regression runs, {model: (splits, attrs)}: a BayesianRidge with its predictive variance
    (``var``) and gradient-boosted quantile regressors at QUANTILE_LEVELS (``quantiles``, each row sorted), both fitted
    on the train part only and stored on val and test."""
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import BayesianRidge

    x, y = load_diabetes(return_X_y=True)
    assert x.shape == (442, 10) and sum(DIABETES_PARTS.values()) == 442
    order = np.random.RandomState(DIABETES_SEED).permutation(442)
    parts, start = {}, 0
    for name, n in DIABETES_PARTS.items():
        parts[name] = order[start:start + n]
        start += n
    train = parts["train"]
    split_note = (f"split: numpy RandomState({DIABETES_SEED}).permutation(442), the first 182 patients fit the model "
                  "(train, not stored), the next 130 are val, the last 130 test")
    ridge = BayesianRidge().fit(x[train], y[train])
    var_splits = {}
    for split in SPLITS:
        mean, std = ridge.predict(x[parts[split]], return_std=True)
        var_splits[split] = {"mean": _stable(mean), "targets": y[parts[split]], "var": _stable(std ** 2)}
    boosted = [GradientBoostingRegressor(loss="quantile", alpha=a, n_estimators=100, max_depth=2, learning_rate=0.05,
                                         min_samples_leaf=9, random_state=DIABETES_SEED).fit(x[train], y[train])
               for a in QUANTILE_LEVELS]
    q_splits = {}
    for split in SPLITS:
        # separately fitted quantiles cross in most rows; each row sorted is still a valid set of quantiles
        q = np.sort(_stable(np.column_stack([m.predict(x[parts[split]]) for m in boosted])), axis=1)
        q_splits[split] = {"mean": q[:, QUANTILE_LEVELS.index(0.5)], "targets": y[parts[split]], "quantiles": q,
                           "levels": np.array(QUANTILE_LEVELS)}
    return {
        "bayesian-ridge": (var_splits, {
            "attribution": "Predictions of a model fitted on " + _DIABETES + "licence BSD-3-Clause (scikit-learn)",
            "model": "sklearn.linear_model.BayesianRidge() on the 10 standardised variables; var is the predictive "
                     "variance of predict(return_std=True) squared (noise included)",
            "split": split_note}),
        "gbr-quantile": (q_splits, {
            "attribution": "Predictions of models fitted on " + _DIABETES + "licence BSD-3-Clause (scikit-learn)",
            "model": "sklearn.ensemble.GradientBoostingRegressor(loss='quantile', alpha=level, n_estimators=100, "
                     "max_depth=2, learning_rate=0.05, min_samples_leaf=9, random_state=0), one per level "
                     "0.05, 0.1, ..., 0.95; each row's quantiles sorted; mean is the 0.5 quantile",
            "split": split_note}),
    }


def build(source: Path, output: Path = OUTPUT) -> Path:
    """Write ``output`` from the three .npz files in ``source`` (the three runs, then the ensemble of the two
    CIFAR-10 runs as a members run), then the two diabetes regression runs; returns the output path."""
    assert len(CIFAR10_CLASSES) == 10 and len(CIFAR100_CLASSES) == 100 == len(set(CIFAR100_CLASSES))
    tmp = output.with_name(f".{output.name}.building")
    if tmp.exists():
        tmp.unlink()
    try:
        for model, dataset, filename, upstream, loss, classes in RUNS:
            with np.load(source / filename, allow_pickle=False) as z:
                splits = {s: ("logits", z[f"logits_{s}"], z[f"labels_{s}"].astype(np.int64)) for s in SPLITS}
            attrs = {"attribution": f"Logits of {_ORIGIN}data/{upstream}/",
                     "training_loss": loss, "source_file": filename}
            write_splits(tmp, model, dataset, splits, class_names=classes, attrs=attrs, compression="gzip")
        model, dataset, files = ENSEMBLE
        parts = {}
        for split in SPLITS:
            members = []
            for filename in files:
                with np.load(source / filename, allow_pickle=False) as z:
                    members.append((z[f"logits_{split}"], z[f"labels_{split}"].astype(np.int64)))
            parts[split] = stack_members(f"{model}/{dataset} {split}", members)
        attrs = {"attribution": f"Logits of {_ORIGIN}data/cifar10_resnet110/ and data/focal_cifar10_resnet110/",
                 "training_loss": "member 0: Brier; member 1: adaptive focal loss (FLSD-53)",
                 "source_file": ", ".join(files)}
        write_members(tmp, model, dataset, parts, kind="ensemble", class_names=CIFAR10_CLASSES, attrs=attrs,
                      compression="gzip")
        for model, (splits, attrs) in regression_splits().items():
            write_regression(tmp, model, "diabetes", splits, attrs=attrs, compression="gzip")
        with h5py.File(tmp, "r+") as f:
            f.attrs["attribution"] = ROOT_ATTRIBUTION
        os.replace(tmp, output)
    finally:
        if tmp.exists():
            tmp.unlink()
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE,
                        help=f"directory holding the .npz files (default: {DEFAULT_SOURCE})")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT, help=f"output file (default: {OUTPUT})")
    args = parser.parse_args(argv)
    out = build(args.source, args.output)
    for run in list_runs(out):
        print(f"{run.name}: K = {run.k}, " + ", ".join(f"{s.name} N = {s.n}" for s in run.splits))
    for reg in list_regression_runs(out):
        print(f"{reg.name}: regression, {reg.describe()}, " + ", ".join(f"{s.name} N = {s.n}" for s in reg.splits))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
