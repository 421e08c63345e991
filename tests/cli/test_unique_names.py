"""Output names derived from run names are injective: runs whose names sanitise alike each get a diagram of their
own (a short hash of the original name appended), and no output is lost."""

import hashlib

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.io.writer import write_run
from calibview.core.reports.names import unique_names, unique_stems

COLLIDING = ("m/a<b", "m/a>b", "m_a/b")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


@pytest.mark.qt                     # the diagrams are drawn by the window's canvas
def test_three_runs_that_sanitise_alike_get_three_diagrams(tmp_path):
    data, out = tmp_path / "in.h5", tmp_path / "rep"
    rng = np.random.default_rng(0)
    for run in COLLIDING + ("other/run",):
        model, dataset = run.split("/")
        for split in ("val", "test"):
            write_run(data, model, dataset, split, rng.normal(size=(120, 3)).astype(np.float32),
                      rng.integers(0, 3, 120))
    assert main(["report", str(data), "--calibrators", "none", "--n-boot", "0", "-o", str(out), "--quiet"]) == 0
    diagrams = sorted(p.name for p in out.glob("diagram*.png"))
    assert diagrams == sorted([f"diagram_m_a_b_{_digest(r)}.png" for r in COLLIDING] + ["diagram_other_run.png"])
    assert len({(out / n).read_bytes() for n in diagrams}) == 4           # four different pictures


def test_names_are_stable_injective_and_plain_where_no_collision():
    keys = [[r] for r in COLLIDING] + [["x/y"], ["x/y"]]
    names = unique_names(keys, "diagram", ".png")
    assert names[3] == names[4] == "diagram_x_y.png"
    assert len(set(names[:4])) == 4 and names[:3] == [f"diagram_m_a_b_{_digest(r)}.png" for r in COLLIDING]
    assert unique_names(keys, "diagram", ".png") == names
    assert unique_names([[]], "diagram", ".png") == ["diagram.png"]
    assert unique_names([["m/a", "test"], ["m/a", "deploy"]], "diagram", "") == ["diagram_m_a_test",
                                                                                 "diagram_m_a_deploy"]


def test_a_hash_that_meets_another_name_is_lengthened():
    first = unique_stems([("a/b",), ("a_b",)], "d")
    planted = first[("a/b",)].split("d_", 1)[1]                 # a run literally named like a hashed stem
    stems = unique_stems([("a/b",), ("a_b",), (planted,)], "d")
    assert len(set(stems.values())) == 3
