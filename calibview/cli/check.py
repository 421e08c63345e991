"""``calibview check CONFIG FILE``: the release's acceptance checklist re-computed on a split, for CI pipelines.
Exit 0 when every criterion passes, 1 when any fails (``--weights`` files that do not match the config's record
included), 2 on bad input (tampered config, fit-data mismatch, another run or class count, unknown split)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_common_options

HELP = "re-compute the acceptance checklist of an inference config on a split (exit 0 pass, 1 fail, 2 bad input)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The config, the data, the split, the limits of the checklist (default: calibview.core.release.limits'
    Limits) and the common options."""
    from calibview.core.release.limits import Limits      # plain data: no numpy, no torch

    limits = Limits()
    p.add_argument("config", help="inference_config.json written by calibview release")
    p.add_argument("file", help="HDF5 logits file with labelled data of the deployment domain")
    p.add_argument("--split", default=None, help="split to check (default: the config's eval_split)")
    p.add_argument("--max-ece", type=float, default=limits.max_ece)
    p.add_argument("--max-class-ece", type=float, default=limits.max_class_ece)
    p.add_argument("--max-high-conf-gap", type=float, default=limits.max_high_conf_gap)
    p.add_argument("--high-conf", type=float, default=limits.high_conf)
    p.add_argument("--use-bound", choices=("point", "upper"), default=limits.use_bound,
                   help="compare the point estimate (default) or the interval's upper bound with each limit")
    p.add_argument("--min-slice", type=int, default=limits.min_slice,
                   help="classes with fewer samples are left out")
    p.add_argument("--n-boot", type=int, default=None, help="resamples (default: the config's)")
    p.add_argument("--json", action="store_true", help="print a JSON list of criteria")
    p.add_argument("--weights", action="append", default=[], metavar="FILE",
                   help="verify a model weights file against the SHA-256 and size the config records (repeatable; "
                        "a mismatch fails, exit 1)")
    add_common_options(p)


def run(args) -> int:
    """Re-compute the checklist and print it (or its JSON); the exit status is the verdict."""
    import json

    from calibview.core.release import config as rel
    from calibview.core.release.acceptance import Limits, criteria, evaluate_config, verdict
    from calibview.core.evaluation.engine import Engine
    from calibview.core.release.weights import weights_criteria
    from calibview.cli.shared import criteria_table

    config = rel.load_config(args.config)
    weights = weights_criteria(config, args.weights)       # read before any work: a missing file is bad input
    split = args.split or config["provenance"]["eval_split"]
    limits = Limits(max_ece=args.max_ece, max_class_ece=args.max_class_ece, max_high_conf_gap=args.max_high_conf_gap,
                    high_conf=args.high_conf, use_bound=args.use_bound, min_slice=args.min_slice)
    checked = evaluate_config(Engine(), config, args.file, split, min_slice=args.min_slice, n_boot=args.n_boot,
                              device=args.device, path=args.config)
    rows = criteria(config, checked, limits) + weights
    passed = all(c.passed for c in rows)
    if args.json:
        print(json.dumps([c.record() for c in rows], indent=2))
    else:
        print(f"{rel.run_name(config)} on {split} (N={checked.evaluation.n_eval}) with {config['calibrator']['method']} "
              f"of config {config['config_sha256'][:12]}")
        print(criteria_table(rows))
        print(verdict(checked.result.metrics["ece"].value))
        print("PASS: every criterion passes." if passed else
              f"FAIL: {sum(not c.passed for c in rows)} of {len(rows)} criteria fail.")
    return 0 if passed else 1
