"""The shared options: their defaults come from the core, the core's parameter errors read as flags, and the
parser of one command leaves the others' (and their imports) alone."""

import dataclasses
import subprocess
import sys

import pytest

from calibview.cli.options import flag_message, request_defaults, size_text
from calibview.cli.program import COMMANDS, build_parser
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.memory import DEFAULT_MAX_MEMORY, parse_size


@pytest.mark.parametrize("message, parameters, expected", [
    ("target_precision must lie in (0, 1], not 2.", ("target_precision",),
     "--target-precision must lie in (0, 1], not 2."),
    ("device=cuda was requested; use device=cpu or auto.", ("device",),
     "--device cuda was requested; use --device cpu or auto."),
    ("Give either threshold or target_precision, not both.", ("threshold", "target_precision"),
     "Give either --threshold or --target-precision, not both."),
    ("fit_split and eval_split are both 'eval_split': give a held-out eval_split.", ("fit_split", "eval_split"),
     "--fit-split and --eval-split are both 'eval_split': give a held-out --eval-split."),
    ("out=/tmp/out is not empty; pass force=True to add (other files stay).", ("out", "force"),
     "--out /tmp/out is not empty; pass --force to add (other files stay)."),
    ("need a fit split (fit_split).", ("fit_split",), "need a fit split (--fit-split)."),
    ("out_dir=/x exists", ("out_dir",), "--out /x exists"),
])
def test_parameter_errors_name_the_flags(message, parameters, expected):
    assert flag_message(ParameterError(message, *parameters)) == expected


def test_other_errors_keep_their_message():
    assert flag_message(CalibviewError("bandwidth must be positive")) == "bandwidth must be positive"


def test_the_evaluation_defaults_are_the_requests():
    d = {f.name: f.default for f in dataclasses.fields(EvalRequest) if f.default is not dataclasses.MISSING}
    args = build_parser(["metrics"]).parse_args(["metrics"])
    assert args.bins == str(d["bins"]) and float(args.bandwidth) == d["bandwidth"] and args.kernel == d["kernel"]
    assert (args.n_boot, args.seed, args.level, args.device) == (d["n_boot"], d["seed"], d["level"], d["device"])
    assert parse_size(args.max_memory) == DEFAULT_MAX_MEMORY == request_defaults()["max_memory"]
    assert size_text(2 << 30) == "2G" and size_text(1536 << 20) == "1536M" and size_text(1000) == "1000"
    release = build_parser(["release"]).parse_args(["release", "f.h5", "--run", "r", "--eval-split", "e", "-o", "o"])
    assert (release.bins, release.bandwidth, release.n_boot, release.fit_split) == (d["bins"], d["bandwidth"],
                                                                                    d["n_boot"], d["fit_split"])


def test_every_command_module_has_help_arguments_and_run():
    for name, module in COMMANDS.items():
        assert isinstance(module.HELP, str) and callable(module.add_arguments) and callable(module.run), name


@pytest.mark.parametrize("argv", [["--help"], ["metrics", "--help"], ["report", "--help"], ["runs", "--help"],
                                  ["apply", "--help"], ["import", "--help"]])
def test_help_loads_no_torch(argv):
    """Help is read before anything is computed: the defaults it shows come from torch-free modules."""
    code = ("import sys\nfrom calibview.cli.program import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nsys.exit(1 if 'torch' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert r.returncode == 0 and "usage: calibview" in r.stdout, r.stdout + r.stderr
