"""``calibview release FILE --run R --calibrator ts --fit-split val --eval-split deploy -o DIR``: the inference
config, report.html, metrics.csv, per_class.csv and diagram.png of a calibrated model, all written atomically
after everything was computed."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_common_options, add_lock_options, log_calibrator_warnings, request_defaults

HELP = "fit, evaluate and write the release material: inference_config.json, report.html, CSVs, diagram.png"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The data, the run, the calibrator and its splits, the thresholds, the output, the slices, the audit, the
    evaluation settings (default: EvalRequest's) and the common options."""
    from calibview.core.evaluation.defaults import MIN_SLICE, SLICE_BINS
    from calibview.core.release.limits import DECIDE_ON, Limits
    from calibview.core.reports.selective import DEFAULT_AUDIT

    d = request_defaults()
    p.add_argument("file", help="HDF5 logits file holding the fit and eval splits")
    p.add_argument("--run", required=True, metavar="MODEL/DATASET")
    p.add_argument("--calibrator", default="ts", help="calibrator to ship (default: ts)")
    p.add_argument("--fit-split", default=d["fit_split"], help="split the calibrator and thresholds are fitted on")
    p.add_argument("--eval-split", required=True, help="held-out split of the deployment domain")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--target-precision", type=float, default=None, metavar="P",
                   help="decide a global and per-class thresholds reaching precision P on calibrated fit scores")
    g.add_argument("--threshold", type=float, default=None, metavar="T", help="ship a fixed global threshold T")
    p.add_argument("-o", "--out", required=True, help="output directory (created)")
    p.add_argument("--by", default=None, metavar="COLUMN", help="metadata column (or 'class') to slice by")
    p.add_argument("--slice-bins", type=int, default=SLICE_BINS,
                   help=f"quantile groups of a float column (default {SLICE_BINS})")
    p.add_argument("--min-slice", type=int, default=MIN_SLICE, help=f"smallest slice evaluated (default {MIN_SLICE})")
    p.add_argument("--audit", default=",".join(f"{t:g}" for t in DEFAULT_AUDIT),
                   help="high-confidence thresholds audited")
    p.add_argument("--bins", type=int, default=d["bins"], help=f"equal-width bins (default {d['bins']})")
    p.add_argument("--bandwidth", type=float, default=d["bandwidth"])
    p.add_argument("--kernel", default=d["kernel"])
    p.add_argument("--n-boot", type=int, default=d["n_boot"], help="bootstrap resamples per interval")
    p.add_argument("--seed", type=int, default=d["seed"])
    p.add_argument("--level", type=float, default=d["level"])
    p.add_argument("--decide-on", choices=DECIDE_ON, default=Limits().decide_on,
                   help="the report's checklist: interval (default; pass, fail or inconclusive) or point")
    p.add_argument("--no-diagram", action="store_true", help="skip diagram.png (the report draws an SVG instead)")
    p.add_argument("--allow-warnings", action="store_true",
                   help="release a calibrator whose fit has warnings (refused otherwise); the config records them")
    p.add_argument("--weights", action="append", default=[], metavar="FILE",
                   help="a model weights file the config ships with: its SHA-256 and size are recorded "
                        "(repeatable; `check --weights` verifies them)")
    p.add_argument("--sign", default=None, metavar="KEYFILE",
                   help="sign the config with the Ed25519 private key in the PEM file KEYFILE (`check --trust "
                        "PUBKEY` verifies it; docs/RELEASE.md)")
    add_common_options(p)
    add_lock_options(p)


def run(args) -> int:
    """Build the release, write its files and print its numbers, verdict, thresholds, slices and checklist."""
    from calibview.core.release import config as rel
    from calibview.core.release.acceptance import Limits
    from calibview.core.evaluation.engine import Engine
    from calibview.core.errors import CalibviewError
    from calibview.core.release.build import build_release, per_class_csv
    from calibview.core.reports.tables import metrics_csv
    from calibview.core.reports.html import render
    from calibview.core.release.weights import weights_records
    from calibview.cli.shared import out_dir, render_png, write_all
    from calibview.core.io.safe_io import refuse_overwriting_inputs
    from calibview.core.reports.folder import RELEASE_FILES, ReportFolder

    out = out_dir(args.out)
    refuse_overwriting_inputs([out / name for name in RELEASE_FILES], [args.file])
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "log_level", "quiet", "lock_timeout")}
    folder = ReportFolder(out, inputs=[args.file], settings=settings, release=True)   # refused before any work
    weights = weights_records(args.weights)          # a missing file is refused before any work
    key = None
    if args.sign is not None:                         # so is a missing or wrong key
        from calibview.core.release import signing

        key = signing.load_private_key(args.sign)
    try:
        audit = [float(x) for x in args.audit.split(",")]
    except ValueError:
        raise CalibviewError(f"--audit takes comma-separated thresholds such as 0.9,0.95, not {args.audit!r}.") from None
    r = build_release(Engine(), args.file, args.run, args.calibrator, args.fit_split, args.eval_split,
                      threshold=args.threshold, target_precision=args.target_precision, bins=args.bins,
                      bandwidth=args.bandwidth, kernel=args.kernel, n_boot=args.n_boot, seed=args.seed,
                      level=args.level, device=args.device, by=args.by, slice_bins=args.slice_bins,
                      min_slice=args.min_slice, audit_thresholds=audit,
                      limits=Limits(min_slice=args.min_slice, decide_on=args.decide_on),
                      allow_warnings=args.allow_warnings, weights=weights)
    ev = r.evaluation
    log_calibrator_warnings(ev)
    png = None if args.no_diagram else render_png(
        ev, f"{ev.run.name} · {ev.request.eval_split} (N = {ev.n_eval:,}, K = {ev.k})")
    config = r.config if key is None else signing.sign(r.config, key)
    files = {"inference_config.json": rel.config_text(config), "metrics.csv": metrics_csv(r.rows),
             "per_class.csv": per_class_csv(r.per_class), "report.html": render(r, png)}
    if png:
        files["diagram.png"] = png
    with folder:                    # staged beside --out, swapped in as a whole when every file is written
        write_all(folder.dir, files, inputs=[args.file])
    paths = folder.written
    m = r.config["metrics"]
    t = r.config["thresholds"]
    print(f"{ev.run.name}: {r.name} fitted on {args.fit_split} (N={ev.n_fit}), evaluated on {args.eval_split} "
          f"(N={ev.n_eval}): ECE {rel_pct(m.get('ece'))} [{rel_pct(m.get('ece_lo'))}, {rel_pct(m.get('ece_hi'))}]")
    print(r.verdict)
    if t["target_precision"] is not None:
        per = t["per_class"] or []
        print(f"thresholds for precision {t['target_precision']:g}: global {_f(t['global'])}, per class "
              f"{sum(v is not None for v in per)} of {len(per)} reachable")
    elif t["global"] is not None:
        print(f"global threshold {t['global']:g}")
    if r.slices:
        small = [s for s in r.slices if s.get("n", 0) < args.min_slice]
        flagged = [str(s["slice"]) for s in r.slices if s.get("flagged")]
        print(f"slices by {args.by}: {len(r.slices)} ({len(small)} below --min-slice)" +
              (f", ECE differs from the whole split in: {', '.join(flagged)}" if flagged else ""))
    failed = [c.criterion for c in r.checklist if c.outcome == "fail"]
    unsure = [c.criterion for c in r.checklist if c.outcome == "inconclusive"]
    print("checklist (default limits): " + ("; ".join(
        ([f"failing: {'; '.join(failed)}"] if failed else []) +
        ([f"inconclusive (N={ev.n_eval} too small to decide): {'; '.join(unsure)}"] if unsure else []))
        or "all pass"))
    print(f"config_sha256 {r.config['config_sha256']}")
    if key is not None:
        print(f"signed with the Ed25519 key {config['signature']['key_sha256'][:12]} ({args.sign})")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def rel_pct(x) -> str:
    """A fraction as a percentage with two decimals, ``-`` for None."""
    return "-" if x is None else f"{100 * x:.2f}%"


def _f(x) -> str:
    return "none" if x is None else f"{x:.4f}"
