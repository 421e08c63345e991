"""Commands that compute nothing load no torch: ``calibview runs`` (metadata only), ``--help``, every command's
``--help`` and an argument error. Importing torch takes about 1.5 s, three times what these should take in all.

Each command runs in a fresh process, which then reports the heavy packages it loaded: module sets are asserted,
not wall times (those depend on the machine and its load)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from calibview.cli.options import request_defaults
from calibview.cli.program import COMMANDS

RUN = """
import json, sys
from calibview.cli.program import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
print(json.dumps({"rc": rc, "loaded": sorted(m for m in %r if m in sys.modules)}))
"""
#: what no command that computes nothing may load
HEAVY = ("torch", "scipy", "matplotlib", "PySide6", "pyqtgraph", "calibview.core.io.stream")
#: what --help and an argument error need not load either (a listing reads the file with them)
READERS = ("numpy", "h5py")


def loaded(args: list[str], cwd) -> tuple[int, list[str], str]:
    """(exit status, the HEAVY and READERS modules loaded, stdout before the report) of ``calibview ARGS``."""
    r = subprocess.run([sys.executable, "-c", RUN % (HEAVY + READERS,), *args], capture_output=True, text=True,
                       cwd=cwd, timeout=120)
    out, _, last = r.stdout.rstrip("\n").rpartition("\n")
    report = json.loads(last)
    return report["rc"], report["loaded"], out


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]] + [[name, "--help"] for name in COMMANDS],
                         ids=" ".join)
def test_help_loads_neither_torch_nor_numpy(args, tmp_path):
    rc, mods, out = loaded(args, tmp_path)
    assert rc == 0
    assert out.startswith("usage: calibview") or out.startswith("calibview ")
    assert mods == []


@pytest.mark.parametrize("args", [["nosuchcommand"], ["report"], ["check"], ["drift", "c.json"],
                                  ["release", "f.h5"], ["slices", "--min-slice", "x"], ["metrics", "--bins"],
                                  ["runs", "--bogus"]], ids=" ".join)
def test_an_argument_error_loads_neither_torch_nor_numpy(args, tmp_path):
    rc, mods, _ = loaded(args, tmp_path)
    assert rc == 2
    assert mods == []


def test_runs_lists_the_demo_without_torch(demo_file, tmp_path):
    rc, mods, out = loaded(["runs", str(demo_file)], tmp_path)
    assert rc == 0
    assert "resnet110-brier/cifar100\tK=100\t" in out
    assert not set(mods) & set(HEAVY)


@pytest.mark.parametrize("command", ["runs", "metrics", "report"])
def test_a_missing_file_is_refused_without_torch(command, tmp_path):
    rc, mods, _ = loaded([command, str(tmp_path / "missing.h5")], tmp_path)
    assert rc == 2
    assert not set(mods) & set(HEAVY)


def test_an_unknown_calibrator_is_refused_without_torch(demo_file, tmp_path):
    rc, mods, _ = loaded(["metrics", str(demo_file), "--calibrators", "none,tss"], tmp_path)
    assert rc == 2
    assert not set(mods) & set(HEAVY)


def test_the_known_calibrators_are_the_registrys():
    from calibview.core.calibrators import base, registry  # noqa: F401  (registering every family)
    from calibview.core.evaluation.defaults import KNOWN_CALIBRATORS

    assert KNOWN_CALIBRATORS == tuple(base._REGISTRY)


def test_the_help_defaults_are_the_cores():
    # the CLI reads request_defaults (plain constants); a request names the same values
    from calibview.core.evaluation.request import EvalRequest
    from calibview.core.io.memory import DEFAULT_MAX_MEMORY

    fields = {f.name: f.default for f in dataclasses.fields(EvalRequest)}
    d = request_defaults()
    assert {k: v for k, v in d.items() if k != "max_memory"} == {k: fields[k] for k in d if k != "max_memory"}
    assert d["max_memory"] == DEFAULT_MAX_MEMORY and fields["max_memory"] is None


def test_a_fit_by_l_bfgs_loads_no_torch_dynamo(tmp_path):
    """Vector and matrix scaling fit by torch's L-BFGS; a torch optimiser's first add_param_group imports
    torch._dynamo (1.3-1.8 s here) unless calibview's subclass skips that wrapper. The fits must still run."""
    import calibview

    r = subprocess.run([sys.executable, "-c", RUN % (("torch", "torch._dynamo"),), "metrics",
                        str(calibview.demo_path()), "--run", "resnet110-brier/cifar10", "--calibrators", "vs,ms",
                        "--n-boot", "0", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    out, _, last = r.stdout.rstrip("\n").rpartition("\n")
    report = json.loads(last)
    assert report["rc"] == 0, r.stderr[-2000:]
    assert report["loaded"] == ["torch"]
    rows = json.loads(out)
    assert [row["calibrator"] for row in rows] == ["vs", "ms"] and all(row["nll"] > 0 for row in rows)
