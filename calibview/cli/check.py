"""``calibview check CONFIG FILE``: the release's acceptance checklist re-computed on a split, for CI pipelines.
Exit 0 when every criterion passes, 1 when any fails or is inconclusive (its interval straddles the limit; a
calibrator released with fit warnings fails; ``--weights`` files that do not match the config's record fail), 2 on
bad input (tampered config, fit-data mismatch, another run or class count, unknown split; with ``--trust PUBKEY``
an unsigned config or one whose signature does not verify with that key)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_common_options

HELP = ("re-compute the acceptance checklist of an inference config on a split (exit 0 pass, 1 fail or inconclusive, "
        "2 bad input)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The config, the data, the split, the limits of the checklist (default: calibview.core.release.limits'
    Limits) and the common options."""
    from calibview.core.release.limits import DECIDE_ON, Limits      # plain data: no numpy, no torch

    limits = Limits()
    p.add_argument("config", help="inference_config.json written by calibview release")
    p.add_argument("file", help="HDF5 logits file with labelled data of the deployment domain")
    p.add_argument("--split", default=None, help="split to check (default: the config's eval_split)")
    p.add_argument("--max-ece", type=float, default=limits.max_ece)
    p.add_argument("--max-class-ece", type=float, default=limits.max_class_ece)
    p.add_argument("--max-high-conf-gap", type=float, default=limits.max_high_conf_gap)
    p.add_argument("--high-conf", type=float, default=limits.high_conf)
    p.add_argument("--min-p-ece", type=float, default=limits.min_p_ece, metavar="P",
                   help="fail when the ECE calibration test's p-value (consistency resampling, --n-boot redraws) is "
                        "below P (pass or fail, never inconclusive; default: not checked)")
    p.add_argument("--min-p-skce", type=float, default=limits.min_p_skce, metavar="P",
                   help="fail when the SKCE kernel calibration test's p-value is below P (default: not checked)")
    p.add_argument("--decide-on", choices=DECIDE_ON, default=limits.decide_on,
                   help="interval (default): pass when the whole interval is within the limit, fail when it is all "
                        "beyond, inconclusive otherwise; point: compare the point estimate")
    p.add_argument("--use-bound", choices=("point", "upper"), default=limits.use_bound,
                   help="upper: compare the interval's upper bound alone with each limit (pass or fail), whatever "
                        "--decide-on says")
    p.add_argument("--min-slice", type=int, default=limits.min_slice,
                   help="classes with fewer samples are left out")
    p.add_argument("--n-boot", type=int, default=None, help="resamples (default: the config's)")
    p.add_argument("--json", action="store_true", help="print a JSON list of criteria")
    p.add_argument("--weights", action="append", default=[], metavar="FILE",
                   help="verify a model weights file against the SHA-256 and size the config records (repeatable; "
                        "a mismatch fails, exit 1)")
    p.add_argument("--trust", default=None, metavar="PUBKEY",
                   help="refuse (exit 2) a config that is not signed by the Ed25519 key whose public half is the PEM "
                        "file PUBKEY (release --sign; docs/RELEASE.md)")
    add_common_options(p)


#: what the integrity hash can and cannot tell, said by every check without --trust
HASH_NOTE = ("note: config_sha256 detects accidental changes, not deliberate edits (anyone can recompute it); sign "
             "with release --sign and check with --trust PUBKEY to detect those.")


def run(args) -> int:
    """Re-compute the checklist and print it (or its JSON); the exit status is the verdict."""
    import json

    from calibview.core.release import config as rel
    from calibview.core.release.acceptance import Limits, criteria, evaluate_config, summary, verdict
    from calibview.core.evaluation.engine import Engine
    from calibview.core.release.weights import weights_criteria
    from calibview.cli.shared import criteria_table

    if args.trust is not None:
        from calibview.core.release import signing

        key = signing.load_public_key(args.trust)
        raw = rel.read_config(args.config)
        if isinstance(raw, dict):             # the signature is verified first: it says who changed what
            signing.verify(raw, key, args.config, args.trust)
        config = rel.verify_config(raw, args.config)
    else:
        config = rel.load_config(args.config)
    weights = weights_criteria(config, args.weights)       # read before any work: a missing file is bad input
    split = args.split or config["provenance"]["eval_split"]
    limits = Limits(max_ece=args.max_ece, max_class_ece=args.max_class_ece, max_high_conf_gap=args.max_high_conf_gap,
                    high_conf=args.high_conf, use_bound=args.use_bound, min_slice=args.min_slice,
                    decide_on=args.decide_on, min_p_ece=args.min_p_ece, min_p_skce=args.min_p_skce)
    checked = evaluate_config(Engine(), config, args.file, split, min_slice=args.min_slice, n_boot=args.n_boot,
                              device=args.device, path=args.config)
    rows = criteria(config, checked, limits) + weights
    if args.trust is not None:
        from calibview.core.release.acceptance import Criterion

        rows.append(Criterion("signed by the trusted key", f"key {config['signature']['key_sha256'][:12]}", None,
                              None, "match", True, note=args.trust))
    passed = all(c.passed for c in rows)
    if args.json:
        print(json.dumps([c.record() for c in rows], indent=2))
        if args.trust is None:
            import logging

            logging.getLogger("calibview").warning(HASH_NOTE)
    else:
        print(f"{rel.run_name(config)} on {split} (N={checked.evaluation.n_eval}) with {config['calibrator']['method']} "
              f"of config {config['config_sha256'][:12]}")
        print(criteria_table(rows, limits.rule))
        if args.trust is None:
            print(HASH_NOTE)
        for w in config["calibrator"].get("warnings") or []:
            print(f"⚠ the shipped calibrator's fit: {w}")
        ece = checked.result.metrics["ece"]
        print(verdict(ece.value, ece.lo, ece.hi))
        print(summary(rows, checked.evaluation.n_eval))
    return 0 if passed else 1
