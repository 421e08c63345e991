"""Build deploy_demo.h5 for the release walk-through (the README's last quick start, docs/RELEASE.md's worked
example).

From the bundled demo's CIFAR-100 run (ResNet-110 trained with the Brier loss) it writes:

- ``val`` as it is (the calibrator and the thresholds are fitted on it);
- ``deploy``: a label-shifted hold-out of the deployment domain, carved (seeded) from one half of ``test``: every
  sample of the over-represented superclasses (vehicles, household objects, buildings), a third of the others;
- ``shadow``: later shadow traffic, carved from the other half of ``test`` with another shift (people, aquatic
  mammals, trees, small mammals and reptiles: all their samples, an eighth of the others);
- a ``superclass`` metadata column on every split: the standard CIFAR-100 fine-to-coarse mapping of the 20
  superclasses (Krizhevsky 2009), looked up by class name.

    python examples/deployment_demo.py [OUT.h5]

OUT.h5 defaults to deploy_demo.h5 in the current folder, so run it from a scratch folder (the walk-through starts
with ``cd "$(mktemp -d)"``) or give a path outside the repository.
"""

from __future__ import annotations

import sys

import numpy as np

from calibview import demo_path
from calibview.core.io import discovery
from calibview.core.io import logits as lg
from calibview.core.io import writer

RUN = "resnet110-brier/cifar100"
SEED = 2026

#: the 20 CIFAR-100 superclasses and their 5 classes each
SUPERCLASSES = {
    "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
    "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
    "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
    "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
    "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
    "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
    "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
    "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
    "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
    "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
    "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
    "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
    "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
    "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
    "people": ("baby", "boy", "girl", "man", "woman"),
    "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
    "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
    "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
    "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
    "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}
#: the deployment domain at release: urban and indoor scenes
DEPLOY_FAVOURED = ("vehicles_1", "vehicles_2", "household_electrical_devices", "household_furniture",
                   "large_man-made_outdoor_things", "food_containers")
#: later traffic drifts towards people and wildlife, where the calibrated model is most over-confident
SHADOW_FAVOURED = ("people", "aquatic_mammals", "trees", "small_mammals", "reptiles")
#: the share of the other superclasses' samples kept in each carved split
OTHERS_KEPT = {"deploy": 1 / 3, "shadow": 1 / 8}


def superclass_of(class_names) -> np.ndarray:
    """(K,) superclass name of each class, by name (every class must be in exactly one superclass)."""
    lookup = {c: s for s, members in SUPERCLASSES.items() for c in members}
    assert len(lookup) == 100, "the mapping has 100 distinct classes"
    return np.array([lookup[c] for c in class_names], dtype=object)


def carve(rows: np.ndarray, coarse: np.ndarray, favoured, kept_share: float, rng) -> np.ndarray:
    """Every row of a favoured superclass and ``kept_share`` of the others (seeded), in ascending order."""
    fav = np.isin(coarse[rows], favoured)
    others = rows[~fav]
    kept = rng.choice(others, size=int(round(kept_share * others.size)), replace=False)
    return np.sort(np.concatenate([rows[fav], kept]))


def main(out: str = "deploy_demo.h5") -> None:
    src = demo_path()
    run = discovery.find_run(src, RUN)
    coarse_of_class = superclass_of(run.class_names)
    val, test = lg.read_split(src, run, "val"), lg.read_split(src, run, "test")
    rng = np.random.default_rng(SEED)
    halves = np.array_split(rng.permutation(test.labels.size), 2)
    coarse_test = coarse_of_class[test.labels]
    deploy = carve(np.sort(halves[0]), coarse_test, DEPLOY_FAVOURED, OTHERS_KEPT["deploy"], rng)
    shadow = carve(np.sort(halves[1]), coarse_test, SHADOW_FAVOURED, OTHERS_KEPT["shadow"], rng)
    splits = {"val": ("logits", val.scores, val.labels),
              "deploy": ("logits", test.scores[deploy], test.labels[deploy]),
              "shadow": ("logits", test.scores[shadow], test.labels[shadow])}
    meta = {name: {"superclass": coarse_of_class[labels].astype(str)} for name, (_, _, labels) in splits.items()}
    model, dataset = run.model, run.dataset
    writer.write_splits(out, model, dataset, splits, class_names=run.class_names, overwrite=True, meta=meta)
    for name, (_, _, labels) in splits.items():
        share = {"deploy": DEPLOY_FAVOURED, "shadow": SHADOW_FAVOURED}.get(name)
        note = "" if share is None else \
            f", {100 * np.isin(coarse_of_class[labels], share).mean():.0f}% from its over-sampled superclasses"
        print(f"{out}: {model}/{dataset}/{name} N={labels.size}{note}")

if __name__ == "__main__":
    main(*sys.argv[1:2])
