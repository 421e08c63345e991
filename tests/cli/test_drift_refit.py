"""``drift --refit-out`` protects the shipped config: a refit that is worse than the shipped calibrator on the
verify half, on the acceptance criteria, is not written (exit 1, "refit is worse: not written"); ``--force``
writes it, marked in its provenance; a refit whose per-class thresholds or per-class ECE cannot be computed says
so instead of writing a config that ``check`` would refuse."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from _release_data import NAMES, RUN, ece_direct, toy_logits
from calibview.cli import main
from calibview.core.io import writer
from calibview.core.release import config as rel

FAST = ["--n-boot", "20", "--device", "cpu", "--quiet"]
N_SHADOW = 400


def _write(path, shadow):
    splits = {"val": ("logits",) + toy_logits(600, 1), "deploy": ("logits",) + toy_logits(600, 2),
              "shadow": ("logits",) + shadow}
    writer.write_splits(path, "net", "toy", splits, class_names=NAMES)
    return str(path)


def _release(toy, out):
    assert main(["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
                 "--target-precision", "0.9", "--no-diagram", "-o", str(out), *FAST]) == 0
    return str(out / "inference_config.json")


@pytest.fixture(scope="module")
def misleading(tmp_path_factory):
    """Shadow traffic whose seeded fit half (seed 0, the config's) is under-confident and whose verify half is
    like the release data: a refit on the fit half sharpens, and is over-confident on the verify half."""
    z, y = toy_logits(N_SHADOW, 5)
    fit, _ = rel.halves(N_SHADOW, 0)
    z[fit] *= 0.25
    d = tmp_path_factory.mktemp("misleading")
    toy = _write(d / "toy.h5", (z, y))
    return toy, _release(toy, d / "rel")


def test_a_worse_refit_is_not_written(misleading, tmp_path, capsys):
    toy, config = misleading
    out = tmp_path / "refit"
    args = ["drift", config, toy, "--run", RUN, "--split", "shadow", "--refit-out", str(out), *FAST]
    assert main(args) == 1
    text = capsys.readouterr().out
    assert "refit is worse: not written" in text and "ECE" in text.split("refit is worse: not written")[1]
    assert not out.exists()
    # the same refit with --force: written, and marked in its provenance
    assert main(args + ["--force"]) == 1
    assert "wrote" in capsys.readouterr().out
    new = rel.load_config(out / "inference_config.json")
    assert new["parent"] == rel.load_config(config)["config_sha256"]
    assert any("ECE" in reason for reason in new["provenance"]["forced"])
    # independently: on the verify half the refitted calibrator's ECE is above the shipped one's
    from calibview.core.io.logits import read_split
    d = read_split(toy, RUN, "shadow")
    _, verify = rel.halves(N_SHADOW, 0)
    zv = torch.from_numpy(np.asarray(d.scores)[verify])
    shipped = ece_direct(rel.calibrator_of(rel.load_config(config)).apply(zv).exp().numpy(), d.labels[verify])
    refit = ece_direct(rel.calibrator_of(new).apply(zv).exp().numpy(), d.labels[verify])
    assert refit > shipped + 0.05 and refit > 0.03
    assert new["metrics"]["ece"] == pytest.approx(refit, abs=1e-9)


def test_json_says_whether_the_refit_was_written(misleading, tmp_path, capsys):
    toy, config = misleading
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--refit-out", str(tmp_path / "r"),
                 "--json", *FAST]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["refit_written"] is False and d["refit_config_sha256"] is None
    assert any("ECE" in w for w in d["refit_worse"])
    assert not (tmp_path / "r").exists()


def test_a_refit_on_too_little_data_says_what_cannot_be_computed(tmp_path, capsys):
    """24 shadow rows: 12 to fit on, 12 to verify on; no class of the verify half has 30 samples, so check would
    refuse the config as bad input; and the target precision is reached for no class on 12 samples."""
    z, y = toy_logits(24, 7, scale=3.5)
    toy = _write(tmp_path / "toy.h5", (z, y))
    config = _release(toy, tmp_path / "rel")
    out = tmp_path / "refit"
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--refit-out", str(out), *FAST]) == 1
    text = capsys.readouterr().out
    assert "not written" in text and "per-class ECE cannot be computed" in text, text
    assert not out.exists()
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--refit-out", str(out), "--force",
                 *FAST]) == 1
    capsys.readouterr()
    assert any("per-class ECE cannot be computed" in r
               for r in rel.load_config(out / "inference_config.json")["provenance"]["forced"])


def test_unreachable_per_class_thresholds_are_said(tmp_path, capsys):
    """A fit half where the refitted calibrator cannot reach the target precision for any class."""
    z, y = toy_logits(400, 9)
    fit, _ = rel.halves(400, 0)
    y = y.copy()
    y[fit] = (z[fit].argmax(axis=1) + 1) % 3         # every fit-half prediction wrong: no precision to reach
    toy = _write(tmp_path / "toy.h5", (z, y))
    config = _release(toy, tmp_path / "rel")
    capsys.readouterr()
    out = tmp_path / "refit"
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--refit-out", str(out), "--json",
                 *FAST]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["refit_written"] is False
    assert any("per-class thresholds cannot be computed" in w for w in d["refit_worse"]), d["refit_worse"]
    assert not out.exists()
