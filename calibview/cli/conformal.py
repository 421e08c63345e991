"""``calibview conformal FILE --run R --calib-split val --eval-split test --alpha 0.1,0.05 --score lac,aps,raps``:
split conformal prediction sets, their coverage and size on the evaluation split (overall, by class, by set size
and by metadata slice) with bootstrap intervals (see calibview.core.evaluation.conformal)."""

from __future__ import annotations

import argparse
import sys

from calibview.cli.options import add_input_options, add_run_options, eval_file, request_defaults, size_text
from calibview.cli.shared import compute_each
from calibview.core.errors import CalibviewError
from calibview.startup import add_log_options

HELP = "conformal prediction sets: coverage and set size by class, size and slice, with intervals"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The input, the splits, the levels and scores, the calibrator, Mondrian groups, randomisation, RAPS's
    penalty, the bootstrap and where the records go."""
    from calibview.core.evaluation import defaults          # plain data: no numpy, no torch

    d = request_defaults()
    add_run_options(p)
    p.add_argument("--calib-split", default=defaults.CALIB_SPLIT,
                   help=f"split the conformal quantile is taken on (default {defaults.CALIB_SPLIT})")
    p.add_argument("--eval-split", default=d["eval_split"],
                   help=f"split coverage and set size are measured on (default {d['eval_split']})")
    p.add_argument("--alpha", default=f"{defaults.ALPHA:g}",
                   help=f"miscoverage level(s) in (0, 1), comma-separated (default {defaults.ALPHA:g}): sets cover "
                        "the label with probability at least 1 - alpha")
    p.add_argument("--score", default=",".join(defaults.CONFORMAL_SCORES),
                   help=f"comma-separated among {', '.join(defaults.CONFORMAL_SCORES)} (default: all)")
    p.add_argument("--calibrator", default="none",
                   help="calibrator(s) applied before scoring, comma-separated: none, ts, ... (default none)")
    p.add_argument("--fit-split", default=None,
                   help="split the calibrator is fitted on (default: a split that is neither --calib-split nor "
                        "--eval-split; the calibration split itself is allowed, with a warning)")
    p.add_argument("--mondrian", default=None, metavar="class|COLUMN",
                   help="a quantile per class, or per value of a categorical metadata column of both splits")
    p.add_argument("--randomized", action="store_true",
                   help="randomised aps / raps (one seeded uniform per sample; reproducible with --seed)")
    p.add_argument("--seed", type=int, default=d["seed"],
                   help=f"seed of the randomisation and of the bootstrap, 0 or more (default {d['seed']})")
    p.add_argument("--raps-lambda", type=float, default=defaults.RAPS_LAMBDA,
                   help=f"RAPS's penalty per rank beyond --raps-kreg (default {defaults.RAPS_LAMBDA:g})")
    p.add_argument("--raps-kreg", type=int, default=defaults.RAPS_KREG,
                   help=f"ranks RAPS does not penalise (default {defaults.RAPS_KREG})")
    p.add_argument("--n-boot", type=int, default=d["n_boot"],
                   help=f"bootstrap resamples of the evaluation split per interval (0: none; default {d['n_boot']})")
    p.add_argument("--device", default=d["device"], help=f"cpu, cuda or auto (default: {d['device']})")
    memory = size_text(d["max_memory"])
    p.add_argument("--max-memory", default=memory, metavar="SIZE",
                   help=f"a split larger than this in memory is streamed from disk in chunks (default {memory})")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the records as JSON to stdout")
    out.add_argument("--out", "-o", default=None, metavar="DIR", help="write DIR/conformal.csv and DIR/conformal.png")
    add_log_options(p)
    add_input_options(p)


def _items(text: str, what: str) -> list[str]:
    items = [t.strip() for t in str(text).split(",")]
    if not all(items):
        raise CalibviewError(f"--{what} {text!r} has an empty item; give a comma-separated list without gaps.")
    return list(dict.fromkeys(items))


def _alphas(text: str) -> list[float]:
    out = []
    for item in _items(text, "alpha"):
        try:
            a = float(item)
        except ValueError:
            raise CalibviewError(f"--alpha takes numbers in (0, 1), not {item!r}.") from None
        if not 0.0 < a < 1.0:
            hint = f" (for {a:g} %, give {a / 100:g})" if 1 < a < 100 else ""
            raise CalibviewError(f"--alpha must lie strictly between 0 and 1, not {item}{hint}.")
        out.append(a)
    return out


def toplabel_left_out(runs: list, *, named: bool, allow_none: bool = False) -> list:
    """``runs`` without the top-label runs, which have no conformal sets: each skipped with a note on stderr when
    the file's runs were taken as a whole, refused (one sentence) when one was named or none is left (unless
    ``allow_none``: the report, whose other files they still get)."""
    import logging

    from calibview.core.evaluation.toplabel.absent import NO_CONFORMAL_REASON, is_toplabel

    top = [r for r in runs if is_toplabel(r)]
    if top and (named or (len(top) == len(runs) and not allow_none)):
        which = (f"Run {top[0].name} is a top-label run" if len(top) == 1 else
                 f"Runs {', '.join(r.name for r in top)} are top-label runs")
        raise CalibviewError(f"{which}: {NO_CONFORMAL_REASON}.")
    for r in top:
        logging.getLogger("calibview").warning(f"note: run {r.name} is a top-label run: skipping it "
                                               f"({NO_CONFORMAL_REASON}).")
    return [r for r in runs if not is_toplabel(r)]


def run(args) -> int:
    """Compute every run's records, then print them (a table, or --json) or write conformal.csv and .png."""
    import json
    import math
    from pathlib import Path

    from calibview.core.evaluation.defaults import KNOWN_CALIBRATORS
    from calibview.core.io import discovery, shards
    from calibview.core.io.memory import parse_size

    alphas = _alphas(args.alpha)
    scores = _items(args.score, "score")
    calibrators = _items(args.calibrator, "calibrator")
    for c in calibrators:
        if c not in KNOWN_CALIBRATORS:
            raise CalibviewError(f"Unknown calibrator {c!r}; choose from {', '.join(KNOWN_CALIBRATORS)}.")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise CalibviewError(f"--out {args.out} exists and is not a directory; give a directory to write into.")
    if args.shards and args.file:
        raise CalibviewError("Give either FILE or --shards, not both.")
    file = eval_file(args)
    runs = (shards if shards.is_pattern(file) else discovery).list_runs(file)
    chosen = toplabel_left_out([discovery.find_run(runs, name) for name in args.run] if args.run else runs,
                               named=bool(args.run))
    if args.out and len(chosen) > 1:
        raise CalibviewError(f"--out draws one run's conformal.png; name one with --run (the file has "
                             f"{len(chosen)}: {', '.join(r.name for r in chosen)}).")
    max_memory = parse_size(args.max_memory)

    from calibview.core.evaluation.conformal import COLUMNS, FLOAT_COLUMNS, evaluate_conformal
    from calibview.core.evaluation.engine import Engine

    engine = Engine()
    results = compute_each(chosen, lambda info: info.name, lambda info, bar, cancel: evaluate_conformal(
        engine, file, info.name, calib_split=args.calib_split, eval_split=args.eval_split, alphas=alphas,
        scores=scores, calibrators=calibrators, fit_split=args.fit_split, mondrian=args.mondrian,
        randomized=args.randomized, seed=args.seed, lam=args.raps_lambda, kreg=args.raps_kreg, n_boot=args.n_boot,
        device=args.device, max_memory=max_memory, progress=bar, cancel=cancel), quiet=args.quiet)
    records = [rec for res in results for rec in res.records]
    if args.json:
        finite = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                  for r in records]
        sys.stdout.write(json.dumps(finite, indent=2) + "\n")
    elif args.out:
        _write(Path(args.out), records, COLUMNS, FLOAT_COLUMNS)
    else:
        _print_table(results)
    return 0


def _write(out, records, columns, floats) -> None:
    """conformal.png drawn first (it may fail), then both files; without Qt, the CSV alone and a warning."""
    import logging
    import tempfile
    from pathlib import Path

    from calibview.core.io.safe_io import atomic_write
    from calibview.core.reports.tables import table_csv

    csv_text = table_csv(records, columns, floats=floats)
    png = None
    try:
        from calibview.plot.conformal import conformal_png
    except ImportError as e:           # a headless install without Qt still gets the CSV
        logging.getLogger("calibview").warning(f"warning: no conformal.png ({e}); install PySide6 and pyqtgraph "
                                               "for it.")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            conformal_png(records, Path(tmp) / "conformal.png")
            png = (Path(tmp) / "conformal.png").read_bytes()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "conformal.csv", csv_text)
    print(f"wrote {out / 'conformal.csv'}")
    if png is not None:
        atomic_write(out / "conformal.png", png)
        print(f"wrote {out / 'conformal.png'}")


def _print_table(results) -> None:
    def iv(lo, hi) -> str:
        return f"[{lo:.4f}, {hi:.4f}]" if lo == lo and hi == hi else " " * 16

    print(f"{'run':28s} {'calibrator':10s} {'score':5s} {'alpha':>6s} {'coverage':>8s} {'interval':16s} "
          f"{'size':>8s} {'interval':18s} {'worst cls':>9s} {'empty':>6s} {'full':>6s} {'qhat':>8s}")
    for res in results:
        for r in res.records:
            if r["group"] != "all":
                continue
            worst = res.worst[(r["calibrator"], r["score"], r["alpha"])]
            print(f"{res.run.name[:28]:28s} {r['calibrator'][:10]:10s} {r['score']:5s} {r['alpha']:6g} "
                  f"{r['coverage']:8.4f} {iv(r['coverage_lo'], r['coverage_hi'])} {r['mean_set_size']:8.3f} "
                  f"{iv(r['mean_set_size_lo'], r['mean_set_size_hi']):18s} {worst:9.4f} {r['empty_frac']:6.3f} "
                  f"{r['full_frac']:6.3f} {r['qhat']:8.4f}")
