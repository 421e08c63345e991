"""Several HDF5 files as one run: results identical to the single-file run (small data, shards of uneven size)."""

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.io import shards
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run

RUN = "resnet110-flsd53/cifar10"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, demo_file):
    """The demo run written whole to one file and cut into three uneven shards (float16 in one of them)."""
    d = tmp_path_factory.mktemp("shards")
    whole = d / "whole.h5"
    parts = {split: read_split(demo_file, RUN, split) for split in ("val", "test")}
    for split, data in parts.items():
        write_run(whole, "resnet110-flsd53", "cifar10", split, logits=data.scores, labels=data.labels)
    cuts = {"val": [0, 1000, 3500, 5000], "test": [0, 4000, 4001, 10000]}
    for i in range(3):
        for split, data in parts.items():
            a, b = cuts[split][i], cuts[split][i + 1]
            write_run(d / f"part-{i}.h5", "resnet110-flsd53", "cifar10", split, logits=data.scores[a:b],
                      labels=data.labels[a:b])
    return whole, str(d / "part-*.h5")


def test_shards_list_and_read_like_one_file(sharded):
    whole, pattern = sharded
    (run,) = shards.list_runs(pattern)
    assert run.name == RUN and [s.n for s in run.splits] == [5000, 10000]
    a, b = read_split(whole, RUN, "test"), shards.read_split(pattern, RUN, "test")
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_sharded_evaluation_is_identical_to_the_single_file(sharded):
    whole, pattern = sharded
    kw = dict(run=RUN, calibrators=("none", "ts", "hb"), n_boot=50)
    one, many = evaluate(EvalRequest(file=str(whole), **kw)), evaluate(EvalRequest(file=pattern, **kw))
    for a, b in zip(one.results, many.results):
        assert a.metrics == b.metrics, a.name
        assert a.fitted.to_json()["params"] == b.fitted.to_json()["params"]


def test_cli_shards_option(sharded, tmp_path, capsys):
    _, pattern = sharded
    assert main(["metrics", "--shards", pattern, "--calibrators", "none", "--n-boot", "0", "--json", "--quiet"]) == 0
    assert '"calibrator": "none"' in capsys.readouterr().out


def test_shard_errors(tmp_path, sharded):
    with pytest.raises(CalibviewError, match="No file matches"):
        shards.list_runs(str(tmp_path / "nothing-*.h5"))
    rng = np.random.default_rng(0)
    write_run(tmp_path / "odd-0.h5", "m", "d", "test", logits=rng.normal(size=(10, 3)), labels=np.zeros(10, int))
    write_run(tmp_path / "odd-1.h5", "m", "d", "test", logits=rng.normal(size=(10, 4)), labels=np.zeros(10, int))
    with pytest.raises(CalibviewError, match="same layout"):
        shards.list_runs(str(tmp_path / "odd-*.h5"))
