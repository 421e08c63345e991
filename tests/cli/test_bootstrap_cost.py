"""A bootstrap's cost is known before it starts: one that would not fit the memory budget is refused at once
(exit 2, nothing computed), and one that would take more than a minute is announced on stderr."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from calibview.core.errors import CalibviewError
from calibview.cli.options import announce_cost
from calibview.core.evaluation import cost
from calibview.core.evaluation.request import EvalRequest


def test_a_runaway_n_boot_is_refused_before_any_work(demo_file, tmp_path):
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "calibview", "metrics", str(demo_file), "--n-boot", "1000000000",
                        "--calibrators", "none,ts"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "lower --n-boot" in r.stderr and "memory budget" in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""
    assert time.perf_counter() - t < 60          # refused up front, not after hours of resampling


def test_a_long_bootstrap_is_announced(demo_file, caplog):
    req = EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", n_boot=100_000,
                      calibrators=("none", "ts", "hb", "ir", "platt", "vs", "ms"))
    with caplog.at_level(logging.WARNING, logger="calibview"):
        announce_cost([req])
    assert "100000 resamples will take about" in caplog.text and "lower --n-boot" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="calibview"):
        announce_cost([EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", n_boot=1000)])
    assert caplog.text == ""


def test_the_cost_model_grows_with_every_factor():
    base = cost.bootstrap_cost(10_000, 100, 1000, 2)
    assert cost.bootstrap_cost(20_000, 100, 1000, 2).seconds > base.seconds
    assert cost.bootstrap_cost(10_000, 1000, 1000, 2).seconds > base.seconds
    assert cost.bootstrap_cost(10_000, 100, 2000, 2).seconds == 2 * base.seconds
    assert cost.bootstrap_cost(10_000, 100, 1000, 4).nbytes > base.nbytes
    # large splits are resampled in groups: the work stops growing with N
    assert cost.bootstrap_cost(4_000_000, 1000, 1000, 2).seconds == cost.bootstrap_cost(8_000_000, 1000, 1000,
                                                                                            2).seconds


def test_the_engine_itself_refuses_it(demo_file):
    import pytest

    from calibview.core.errors import CalibviewError
    from calibview.core.evaluation.engine import Engine

    eng = Engine()
    with pytest.raises(CalibviewError, match="lower --n-boot"):
        eng.evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar10", n_boot=1_000_000_000))
    assert len(eng.cache) == 0                     # nothing was fitted or scored


def test_a_runaway_bin_count_is_refused_with_its_estimate(demo_file, tmp_path):
    """--bins 1000000 died with "Unable to allocate 224 GiB" (a traceback); now the estimate comes first."""
    r = subprocess.run([sys.executable, "-m", "calibview", "metrics", str(demo_file), "--bins", "1000000",
                        "--n-boot", "100", "--calibrators", "none"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("calibview: error: --bins 1000000 with --n-boot 100 would take about ")
    assert "memory budget" in r.stderr and "use fewer bins" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_the_bins_estimate_is_the_arrays_sizes():
    n, k, b = 2_000, 10, 1_000
    nbytes, _ = cost.bins_bytes(n, k, b, 0, 1)
    assert nbytes == 2 * 8 * k * b                          # (K, B) float64, accumulated and kept
    with_boot, _ = cost.bins_bytes(n, k, b, 100, 2)
    assert with_boot == 2 * (2 * 8 * k * b + n * 6 * b * 12)
    cost.check_bins(n, k, (10, 15), 100, 2, 2 << 30)
    with pytest.raises(CalibviewError, match="--bins 100000 would take"):
        cost.check_bins(n, 1_000, 100_000, 0, 2, 2 << 30)
