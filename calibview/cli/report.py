"""``calibview report [FILE] --out DIR``: the report folder of every run, written into a staging folder and moved
into ``--out`` when complete: metrics.csv, curves.csv, calibrators.json, ranking.csv, the selective-prediction
files, domains.csv (several eval splits), compare.csv (``--compare``) and the diagrams (drawn offscreen by
calibview.plot when Qt is installed)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from calibview.cli.options import (add_eval_options, add_figure_options, add_lock_options, add_member_options,
                                   engine_for, ensemble_only, eval_file, evaluate_all, figure_options,
                                   first_settings, log_calibrator_warnings, member_rows, requests_from_args)
from calibview.core.errors import CalibviewError

HELP = "write metrics.csv, curves.csv and calibrators.json for every run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The evaluation options, the output folder, the figure options, the selective-prediction options
    (``--audit``, ``--target-precision``) and ``--compare``."""
    add_eval_options(p)
    add_member_options(p, rank=True)
    p.add_argument("--out", "-o", required=True, help="output directory")
    p.add_argument("--no-diagram", action="store_true", help="skip diagram.png (it needs Qt, drawn offscreen)")
    p.add_argument("--diagram-by", choices=("epistemic",), default=None,
                   help="epistemic: a run with members gets its first calibrated curve (the uncalibrated one "
                        "without calibrators) split into three more, the samples of low, mid and high mutual "
                        "information between the members (the terciles of `calibview slices --by epistemic`)")
    p.add_argument("--corp", choices=("consistency", "bootstrap"), default=None,
                   help="draw each calibrator's CORP reliability curve (the bandwidth-free PAV fit) on the "
                        "diagrams with its 90 %% consistency band (consistency), or with its bootstrap band too "
                        "(bootstrap); the bands' resamples are --n-boot (200 with --n-boot 0), seeded by --seed. "
                        "curves.csv's corp columns and mcb_dsc.png come whatever this says")
    p.add_argument("--corp-class", default=None, metavar="CLASS[,CLASS]",
                   help="one-vs-rest CORP of these classes (indices or class names): corp_class.csv (the diagram's "
                        "kernel curve and the PAV steps with their bands on its grid), corp_class_scores.csv (the "
                        "one-vs-rest Brier score's MCB / DSC / UNC per calibrator) and corp_class_<class>.png (P(y = "
                        "c) against p_c, the CORP steps drawn with their bands as --corp says, the consistency band "
                        "without it); reads the evaluation split once per class above two classes")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that holds no earlier report's manifest.json")
    add_lock_options(p)
    add_figure_options(p)
    add_selective_options(p)       # --audit, --target-precision: selective.csv, audit.csv, thresholds.csv
    add_compare_options(p)         # --compare, --reference: compare.csv
    p.add_argument("--conformal", default=None, metavar="ALPHA[,ALPHA]",
                   help="add conformal.csv and conformal.png: split conformal sets (lac, aps, raps) of the "
                        "uncalibrated scores at these miscoverage levels, the quantile taken on the fit split "
                        "(as `calibview conformal --calib-split FIT`)")


def add_selective_options(p: argparse.ArgumentParser) -> None:
    """``--audit`` (the thresholds of audit.csv) and ``--target-precision`` (thresholds.csv)."""
    from calibview.core.reports.selective import DEFAULT_AUDIT

    audit = ",".join(f"{t:g}" for t in DEFAULT_AUDIT)
    p.add_argument("--audit", default=audit, metavar="T,...",
                   help=f"high-confidence audit thresholds for audit.csv (default {audit})")
    p.add_argument("--target-precision", type=float, default=None, metavar="P",
                   help="per-class thresholds reaching precision P on the fit split's calibrated scores, with "
                        "their precision and coverage on the evaluation split: thresholds.csv")


def run(args) -> int:
    """Evaluate, then write the report folder; print a summary line per run and the files written."""
    from calibview.core.reports.folder import ReportFolder
    from calibview.core.reports.selective import check_target, parse_thresholds

    audit = parse_thresholds(args.audit)
    check_target(args.target_precision)
    if args.conformal:
        from calibview.cli.conformal import _alphas
        _alphas(args.conformal)           # a bad level is refused before any work
    prepare_compare(args)         # refuses runs that cannot be compared before any work
    check_diagram_by(args)
    figure = None if args.no_diagram else figure_options(args)
    inputs = [eval_file(args)]
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "log_level", "quiet", "force", "lock_timeout")}
    folder = ReportFolder(args.out, inputs=inputs, settings=settings, force=args.force)   # refused before any work
    from calibview.cli.regression import commands as regression

    planned = regression.plan(args)       # regression runs: refused before any work too
    with engine_for(args) as engine:      # a Dask cluster of --engine dask stays up until the folder is written
        return _evaluate_and_write(args, engine, folder, planned, audit, figure)


def _evaluate_and_write(args, engine, folder, planned, audit, figure) -> int:
    """The evaluations of ``engine``, then the report folder written and the summary printed."""
    from calibview.cli.regression import commands as regression
    from calibview.core.reports.selective import write_selective
    from calibview.core.reports.tables import write_report
    from calibview.core.reports.uncertainty import write_uncertainty

    every = evaluate_all(args, engine)
    evaluations = ensemble_only(every)    # a run's member rows are in metrics.csv only
    reg = regression.evaluate(planned)
    conformal = conformal_results(engine, first_settings(evaluations), args) if args.conformal else []
    from calibview.core.reports.corp import corp_sets

    corp = corp_sets(engine, evaluations)     # bandwidth-free: once per run and eval split, for every setting
    by_class = class_parts(engine, first_settings(evaluations), args.corp_class) if args.corp_class else []
    with folder:                          # written into a staging folder, moved into --out when complete
        _, messages = write_report(evaluations, folder.dir, rows=member_rows(every, args.members), regression=reg,
                                   corp=corp)
        _, notes = write_selective(engine, evaluations, folder.dir, audit, args.target_precision, args.rank_by)
        write_uncertainty(evaluations, folder.dir)
        if len({ev.request.eval_split for ev in evaluations}) > 1:
            write_domains(evaluations, engine, folder.dir)
        if args.compare:
            write_compare(engine, evaluations, args, folder.dir, figure)
        firsts = first_settings(evaluations)
        if not args.no_diagram:
            write_diagrams(firsts, folder.dir, figure, engine, by=args.diagram_by,
                           corp=(corp, args.corp) if args.corp else None)
            write_mcb_dsc(firsts, corp, folder.dir, figure)
        if by_class:
            write_class_corp(by_class, folder.dir, figure, args.corp, draw=not args.no_diagram)
        if conformal:
            write_conformal(conformal, folder.dir, draw=not args.no_diagram)
        if reg and not args.no_diagram:
            write_regression_figures(reg, folder.dir, figure)
    for note in notes:              # through the logger, so that --quiet leaves only errors on stderr
        logging.getLogger("calibview").warning(note)
    for message in messages + folder.notes:
        logging.getLogger("calibview").warning(f"note: {message}")
    for ev in firsts:
        log_calibrator_warnings(ev)
        print(summary_line(ev))
    for line in regression.summary_lines(reg):
        print(line)
    for line in compare_summary(Path(args.out) / "compare.csv") if args.compare else []:
        print(line)
    print("wrote " + ", ".join(str(p) for p in folder.written))
    return 0


def conformal_results(engine, evaluations, args) -> list:
    """The conformal evaluation of each run of ``evaluations`` at ``--conformal``'s levels: every score, the
    uncalibrated probabilities, qhat on the run's fit split (``val`` when it has none), coverage and size on its
    evaluation split with the report's resamples. Computed before anything is written."""
    from calibview.cli.conformal import _alphas, toplabel_left_out
    from calibview.core.evaluation import defaults
    from calibview.core.evaluation.conformal import evaluate_conformal

    alphas = _alphas(args.conformal)
    runs = {(ev.run.file, ev.run.name): ev.run for ev in evaluations}
    kept = {(r.file, r.name) for r in toplabel_left_out(list(runs.values()), named=False, allow_none=True)}
    out = []
    for ev in evaluations:
        if (ev.run.file, ev.run.name) not in kept:        # a top-label run: noted, and no conformal sets
            continue
        req = ev.request
        out.append(evaluate_conformal(engine, req.file, ev.run.name, calib_split=req.fit_split or defaults.CALIB_SPLIT,
                                      eval_split=req.eval_split, alphas=alphas, scores=defaults.CONFORMAL_SCORES,
                                      calibrators=("none",), seed=req.seed, n_boot=req.n_boot, level=req.level,
                                      device=req.device, max_memory=req.max_memory))
    return out


def write_conformal(results, out: Path, draw: bool = True) -> list[Path]:
    """conformal.csv (every run's records, the columns of ``calibview conformal``) and conformal.png (one run) or
    conformal_<model>_<dataset>.png per run; without Qt (or ``draw`` off) the CSV alone."""
    from calibview.core.evaluation.conformal import COLUMNS, FLOAT_COLUMNS
    from calibview.core.io.safe_io import atomic_write
    from calibview.core.reports.names import unique_names
    from calibview.core.reports.tables import table_csv

    records = [r for res in results for r in res.records]
    atomic_write(out / "conformal.csv", table_csv(records, COLUMNS, floats=FLOAT_COLUMNS))
    paths = [out / "conformal.csv"]
    if not draw:
        return paths
    try:
        from calibview.plot.conformal import conformal_png
    except ImportError as e:
        logging.getLogger("calibview").warning(f"warning: no conformal.png ({e}); install PySide6 and pyqtgraph.")
        return paths
    keys = [[res.run.name] if len(results) > 1 else [] for res in results]
    for res, name in zip(results, unique_names(keys, "conformal", ".png")):
        conformal_png(list(res.records), out / name)
        paths.append(out / name)
    return paths


def write_regression_figures(evaluations, out: Path, figure=None) -> list[Path]:
    """regression.png (one regression run) or regression_<model>_<dataset>.png per run: the regression diagram, the
    interval-coverage curve, the PIT histogram and the quantile calibration curve (calibview.plot.regression);
    with ``figure`` ((FigureOptions, formats) of the figure options) one file per format at that width and DPI;
    without Qt, a warning and nothing."""
    try:
        from calibview.plot.regression import regression_figure, regression_png
    except ImportError as e:
        logging.getLogger("calibview").warning(f"warning: no regression.png ({e}); install PySide6 and pyqtgraph.")
        return []
    from calibview.core.reports.names import unique_names

    keys = [[ev.run.name] if len(evaluations) > 1 else [] for ev in evaluations]
    paths = []
    for fmt in (["png"] if figure is None else figure[1]):
        for ev, name in zip(evaluations, unique_names(keys, "regression", f".{fmt}")):
            if figure is None:
                regression_png(ev, out / name)
            else:
                regression_figure(ev, out / name, fmt, figure[0])
            paths.append(out / name)
    return paths


def write_domains(evaluations, engine, out: Path) -> Path:
    """domains.csv: each metric per eval split and its difference to the first split (see
    calibview.core.evaluation.domains)."""
    from calibview.core.evaluation.domains import domain_rows
    from calibview.core.reports.contrasts import domains_csv
    from calibview.core.io.safe_io import atomic_write

    rows = domain_rows(evaluations, lambda ev: engine.distributions(ev.request))
    atomic_write(out / "domains.csv", domains_csv(rows))
    return out / "domains.csv"


def check_diagram_by(args) -> None:
    """Refuse ``--diagram-by`` before any work where it cannot draw: without a diagram, or with no evaluated run
    whose evaluation split has members."""
    if not args.diagram_by:
        return
    if args.no_diagram:
        raise CalibviewError("--diagram-by splits a curve of the diagram; leave out --no-diagram.")
    from calibview.core.io import discovery, shards

    reqs = requests_from_args(args)
    infos = [(shards if shards.is_pattern(r.file) else discovery).find_run(r.file, r.run) for r in reqs]
    if not any(info.split(r.eval_split).members for r, info in zip(reqs, infos)):
        raise CalibviewError(f"--diagram-by {args.diagram_by} needs a run with members (an ensemble or MC-dropout "
                             f"passes) in its evaluation split; {', '.join(sorted({i.name for i in infos}))} "
                             f"{'has' if len(infos) == 1 else 'have'} none.")


def _terciles(ev, engine, by):
    """(calibrator, its TercileCurves) of ``ev``'s diagram for ``--diagram-by`` (None, () when not split)."""
    if not by or engine is None or not ev.run.split(ev.request.eval_split).members:
        if by:
            logging.getLogger("calibview").warning(f"note: {ev.run.name} has no members in {ev.request.eval_split}: "
                                                   f"its diagram is not split by {by}.")
        return None, ()
    from calibview.core.evaluation.members.terciles import default_calibrator, tercile_split

    name = default_calibrator(r.name for r in ev.results)
    return name, tercile_split(engine, ev.request, ev.run).of(name)


def write_diagrams(evaluations, out: Path, figure=None, engine=None, by=None, corp=None) -> list[Path]:
    """diagram.png (one run) or diagram_<model>_<dataset>.png per run, drawn offscreen by calibview.plot's canvas;
    with ``figure`` (options, formats) one publication figure per format instead (calibview.plot.export);
    ``by`` "epistemic" (``--diagram-by``): a members run's first calibrated curve split by epistemic tercile;
    ``corp`` ((run file, run name, eval split) -> CorpSet, "consistency" or "bootstrap"): the CORP curves drawn
    with their bands (``--corp``)."""
    try:
        from calibview.plot.canvas import render_diagram_png
        from calibview.plot.export import render_figure
        from calibview.plot.figure import legend_numbers
        from calibview.plot.spec import calibrator_panels, with_corp, with_terciles
    except ImportError as e:          # a headless install without Qt still gets the CSV and JSON
        logging.getLogger("calibview").warning(f"warning: no diagram.png ({e}); install PySide6 and pyqtgraph for it.")
        return []
    from calibview.core.reports.names import unique_names

    paths = []
    several_runs = len({(ev.run.file, ev.run.name) for ev in evaluations}) > 1
    several_splits = len({ev.request.eval_split for ev in evaluations}) > 1
    keys = [([ev.run.name] if several_runs else []) + ([ev.request.eval_split] if several_splits else [])
            for ev in evaluations]
    names = unique_names(keys, "diagram", ".png")      # runs that sanitise alike get a hash each, none is lost
    for ev, name in zip(evaluations, names):
        title = f"{ev.run.name} · {ev.request.eval_split} (N = {ev.n_eval:,}, K = {ev.k})"
        split_of, curves = _terciles(ev, engine, by)
        cs = corp[0].get((ev.run.file, ev.run.name, ev.request.eval_split)) if corp else None
        steps = (dict(cs.curves) if cs is not None else {}, bool(corp) and corp[1] == "bootstrap")
        if figure is not None:
            opts, formats = figure
            opts = dataclasses.replace(opts, title=title, extra={"bandwidth": f"{ev.request.bandwidth:g}",
                                                                  "kernel": ev.request.kernel})
            panels = with_terciles(with_corp(calibrator_panels(ev.results, k=ev.k, layout=opts.layout,
                                                               subtitle_of=lambda r: legend_numbers(r.metrics,
                                                                                                    loss=r.loss)),
                                             steps[0], bootstrap=steps[1]), split_of, curves, k=ev.k)
            paths += render_figure(panels, out / name, opts, bandwidth=ev.request.bandwidth,
                                   kernel=ev.request.kernel, formats=formats)
            if ev.k == 2 and engine is not None:       # binary: the positive-class diagram besides
                from calibview.plot.spec import positive_class_panels
                scored = engine.scored(ev.request)
                panels = positive_class_panels(ev.results, {nm: sc.stats for nm, sc in scored.items()},
                                               layout=opts.layout)
                if corp:                           # the positive class's own CORP steps (class 1)
                    from calibview.core.reports.corp import corp_set
                    pos = corp_set(engine, ev, bands=bool(ev.request.n_boot), positive=True)
                    panels = with_corp(panels, dict(pos.curves), bootstrap=steps[1])
                paths += render_figure(panels, out / name.replace("diagram", "diagram_positive", 1), opts,
                                       bandwidth=ev.request.bandwidth, kernel=ev.request.kernel, formats=formats)
            continue
        render_diagram_png(list(ev.results), out / name, bandwidth=ev.request.bandwidth, kernel=ev.request.kernel,
                           title=title, terciles=(split_of, curves), corp=steps)
        paths.append(out / name)
    return paths


def class_parts(engine, evaluations, text: str) -> list[tuple]:
    """(evaluation, ClassForecasts, CorpSet) per evaluation and class of ``--corp-class`` (indices or names, comma
    separated), the bands where the evaluation has resamples. A run without such a class (another dataset's
    runs in the same file) or without class probabilities (a top-label run) is left out with a note; when no run
    has one, the sentence saying why is the error, before anything is written."""
    from calibview.core.reports.corp_class import class_corp_set, class_forecasts, class_index

    wanted = [t for t in str(text).split(",") if t.strip()]
    if not wanted:
        raise CalibviewError("--corp-class needs at least one class (an index or a class name).")
    out, refused = [], []
    for ev in evaluations:
        try:
            classes = list(dict.fromkeys(class_index(ev.run, t) for t in wanted))
            parts = [(ev, class_forecasts(engine, ev, c)) for c in classes]
        except CalibviewError as e:
            refused.append(str(e))
            continue
        out += [(ev, fc, class_corp_set(engine, ev, fc.cls, bands=bool(ev.request.n_boot), forecasts=fc))
                for ev, fc in parts]
    if not out and refused:
        raise CalibviewError(refused[0])
    for sentence in refused:
        logging.getLogger("calibview").warning(f"note: --corp-class left a run out: {sentence}")
    return out


def write_class_corp(parts, out: Path, figure=None, mode=None, draw: bool = True) -> list[Path]:
    """corp_class.csv, corp_class_scores.csv and (``draw``) one corp_class_<run>_<class>.png per evaluation and
    class (corp_class_<class>.png for one run and split; at ``figure``'s options and formats): the one-vs-rest
    diagram overlaid, with the CORP steps and their consistency band (``mode`` "bootstrap": the bootstrap band
    too)."""
    from calibview.core.io.safe_io import atomic_write
    from calibview.core.reports.corp_class import class_tables

    curves, scores = class_tables(parts)
    paths = [out / "corp_class.csv", out / "corp_class_scores.csv"]
    atomic_write(paths[0], curves)
    atomic_write(paths[1], scores)
    if not draw:
        return paths
    try:
        from calibview.plot.corp.class_figure import render_class_diagrams
    except ImportError as e:
        logging.getLogger("calibview").warning(f"warning: no corp_class png ({e}); install PySide6 and pyqtgraph.")
        return paths
    opts, formats = figure if figure is not None else (None, ["png"])
    return paths + render_class_diagrams(parts, out, opts, formats, bootstrap=mode == "bootstrap")


def write_mcb_dsc(evaluations, corp, out: Path, figure=None) -> list[Path]:
    """mcb_dsc.png (and one more file per other ``figure`` format, at its width, DPI and font): the MCB-DSC plot of
    every run's calibrators (core.reports.corp.mcb_dsc_points, the rows' corp_mcb / corp_dsc / corp_unc where they
    carry them); without Qt, a warning and nothing."""
    try:
        from calibview.plot.corp.mcb_dsc import render_mcb_dsc
    except ImportError as e:
        logging.getLogger("calibview").warning(f"warning: no mcb_dsc.png ({e}); install PySide6 and pyqtgraph.")
        return []
    from calibview.core.reports.corp import mcb_dsc_points

    opts, formats = figure if figure is not None else (None, [])
    formats = list(dict.fromkeys(["png"] + list(formats)))      # the PNG always, as its name promises
    return render_mcb_dsc(mcb_dsc_points(evaluations, corp), out / "mcb_dsc.png", opts, formats=formats)


def summary_line(ev) -> str:
    """One line per run: error rate, ECE and NLL of every calibrator (and how often it moved the arg-max)."""
    from calibview.core.evaluation.toplabel.absent import absent_metrics

    parts = []
    absent = absent_metrics(ev.run)             # a top-label run has no NLL
    for r in ev.results:
        m = r.metrics
        moved = f" (arg-max moved on {100 * r.argmax_changed:.1f}%)" if r.argmax_changed else ""
        nll = "n/a" if "nll" in absent else f"{m['nll'].value:.4g}"
        parts.append(f"{r.name}: err {100 * (1 - m['accuracy'].value):.2f}% ECE {100 * m['ece'].value:.2f}% "
                     f"NLL {nll}{moved}")
    return f"{ev.run.name} [{ev.request.eval_split}, N={ev.n_eval}, K={ev.k or '?'}] " + "; ".join(parts)


# --- report --compare A,B,... [--reference A]: compare.csv, the paired differences of every run to a reference run
# on the same samples (calibview.core.evaluation.compare), and compare.png -------------------------------------


def add_compare_options(p: argparse.ArgumentParser) -> None:
    """``--compare`` (the runs to compare) and ``--reference`` (the run the others are compared with)."""
    p.add_argument("--compare", metavar="MODEL/DATASET,...", default=None,
                   help="compare these runs (same dataset and eval split, identical labels): compare.csv with each "
                        "metric's paired bootstrap difference to the reference run")
    p.add_argument("--reference", metavar="MODEL/DATASET", default=None,
                   help="the reference run of --compare (default: the first)")


def prepare_compare(args) -> None:
    """Turn --compare into the runs to evaluate (``args.run``) and refuse, before any work, what cannot be
    compared."""
    from calibview.core.evaluation.compare import check_comparable

    if args.reference and not args.compare:
        raise CalibviewError("--reference names the reference run of --compare; give --compare too.")
    if not args.compare:
        return
    if args.run:
        raise CalibviewError("--compare names the runs to compare; leave out --run.")
    runs = [r.strip() for r in args.compare.split(",")]
    if not all(runs):
        raise CalibviewError(f"--compare {args.compare!r} has an empty item; give MODEL/DATASET,MODEL/DATASET.")
    for option, text in (("--eval-split", args.eval_split), ("--bins", args.bins), ("--bandwidth", args.bandwidth),
                         ("--kernel", args.kernel)):
        if text is not None and "," in str(text):
            raise CalibviewError(f"--compare takes one {option[2:]}, not the list {text!r}; compare one setting at "
                                 "a time.")
    args.run = runs
    if args.reference is not None:
        args.reference_index = _reference_index(args)
    check_comparable(requests_from_args(args))


def _reference_index(args) -> int:
    from calibview.core.io import discovery
    from calibview.core.io import shards

    req = requests_from_args(args)[0]
    listing = (shards if shards.is_pattern(req.file) else discovery).list_runs(req.file)
    names = [discovery.find_run(listing, r).name for r in args.run]
    ref = discovery.find_run(listing, args.reference).name
    if ref not in names:
        raise CalibviewError(f"--reference {args.reference} is not among the compared runs ({', '.join(names)}); "
                             "name one of them.")
    return names.index(ref)


def write_compare(engine, evaluations, args, out: Path, figure=None) -> list[Path]:
    """compare.csv from the report's evaluations (one per compared run, in --compare order; the distributions
    behind the intervals are the engine's cached ones) and, unless --no-diagram, compare.png: a panel per
    calibrator with the runs overlaid (line style: run), each titled with every run's ECE and its paired
    difference; ``figure`` ((FigureOptions, formats) of the figure options) sets its size and formats."""
    from calibview.core.evaluation.compare import Comparison, compare_rows
    from calibview.core.reports.contrasts import compare_csv
    from calibview.core.io.safe_io import atomic_write

    dists = [engine.distributions(ev.request) if ev.request.n_boot else {} for ev in evaluations]
    ref = getattr(args, "reference_index", 0)
    rows = compare_rows(evaluations, dists, ref)
    atomic_write(out / "compare.csv", compare_csv(rows))
    paths = [out / "compare.csv"]
    if not args.no_diagram:
        order = [ref] + [i for i in range(len(evaluations)) if i != ref]          # the reference first
        paths += _compare_figure(Comparison(tuple(evaluations[i] for i in order), 0, tuple(rows)), out, figure)
    return paths


def _compare_figure(comparison, out: Path, figure) -> list[Path]:
    import dataclasses
    import logging

    try:
        from calibview.plot.compare import comparison_panels
        from calibview.plot.export import render_figure
        from calibview.plot.spec import FigureOptions
    except ImportError as e:          # a headless install without Qt still gets compare.csv
        logging.getLogger("calibview").warning(f"warning: no compare.png ({e}); install PySide6 and pyqtgraph for it.")
        return []
    ref = comparison.evaluations[0]
    opts, formats = figure if figure is not None else (FigureOptions(), ["png"])
    opts = dataclasses.replace(opts, layout="grid", title=(
        f"{len(comparison.evaluations)} runs on {ref.run.dataset or ref.run.name} {ref.request.eval_split} "
        f"(N = {ref.n_eval:,}), reference {ref.run.name}"), extra={"bandwidth": f"{ref.request.bandwidth:g}",
                                                                   "kernel": ref.request.kernel})
    panels = comparison_panels(comparison.evaluations, "calibrator", comparison)
    return render_figure(panels, out / "compare.png", opts, bandwidth=ref.request.bandwidth,
                         kernel=ref.request.kernel, formats=formats)


def compare_summary(path: Path) -> list[str]:
    """One line per compared run and calibrator naming its significant differences (read back from the CSV)."""
    import csv

    lines = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            run = f"{row['model']}/{row['dataset']}"
            if run == row["reference"]:
                continue
            marks = [m[len("significant_"):] for m, v in row.items() if m.startswith("significant_") and v == "true"]
            lines.append(f"{run} vs {row['reference']} [{row['calibrator']}]: "
                         + (f"significant differences in {', '.join(marks)}" if marks else
                            "no significant difference"))
    return lines
