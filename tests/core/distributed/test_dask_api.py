"""``calibview.evaluate_file``: the records of ``calibview metrics FILE --json`` from a notebook, on this process
or on a LocalCluster of two worker processes (``engine="dask"``), the same numbers either way."""

import json

import numpy as np
import pytest

pytest.importorskip("distributed")

import calibview as cv  # noqa: E402
from calibview.cli import main  # noqa: E402
from calibview.core.errors import CalibviewError  # noqa: E402
from calibview.core.io.writer import write_run  # noqa: E402

from test_dask_engine import _close  # noqa: E402

TIMING = ("seconds", "timing", "evaluated_at")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    rng = np.random.default_rng(3)
    for i, (nv, nt) in enumerate([(300, 500), (250, 420)]):
        for split, n in (("val", nv), ("test", nt)):
            y = rng.integers(0, 5, n)
            z = rng.normal(size=(n, 5)) * 2.0
            z[np.arange(n), y] += 1.2
            write_run(d / f"part-{i}.h5", "net", "data", split, logits=z.astype(np.float32), labels=y)
    return str(d / "part-*.h5")


def _strip(rows):
    return [{k: v for k, v in r.items() if not any(t in k for t in TIMING)} for r in rows]


def test_local_rows_are_the_cli_records(shards, capsys):
    res = cv.evaluate_file(shards, calibrators=["none", "ts"], n_boot=0)
    assert main(["metrics", shards, "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert _close(_strip(res.rows), _strip(cli), 1e-12)


def test_dask_equals_local(shards):
    local = cv.evaluate_file(shards, calibrators=["none", "ts"], n_boot=0)
    dask = cv.evaluate_file(shards, calibrators=["none", "ts"], n_boot=0, engine="dask", scheduler="local:2")
    assert _close(_strip(dask.rows), _strip(local.rows), 1e-9)
    assert dask.calibrators["ts"].temperature_ == pytest.approx(local.calibrators["ts"].temperature_, rel=1e-9)


def test_refusals_in_one_sentence(shards):
    with pytest.raises(CalibviewError, match="engine must be one of local, dask"):
        cv.evaluate_file(shards, engine="spark")
    with pytest.raises(CalibviewError, match="--bootstrap poisson"):
        cv.evaluate_file(shards, engine="dask", n_boot=100, bootstrap="multinomial")
    with pytest.raises(CalibviewError, match="split"):
        cv.evaluate_file(shards, eval_split="nope")
