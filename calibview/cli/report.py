"""``calibview report [FILE] --out DIR``: the report folder of every run, written into a staging folder and moved
into ``--out`` when complete: metrics.csv, curves.csv, calibrators.json, ranking.csv, the selective-prediction
files, domains.csv (several eval splits), compare.csv (``--compare``) and the diagrams (drawn offscreen by
calibview.plot when Qt is installed)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from calibview.cli import compare
from calibview.cli.options import (add_eval_options, add_figure_options, eval_file, evaluate_all, figure_options,
                                   first_settings, log_calibrator_warnings)

HELP = "write metrics.csv, curves.csv and calibrators.json for every run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The evaluation options, the output folder, the figure options, the selective-prediction options
    (``--audit``, ``--target-precision``) and ``--compare``."""
    add_eval_options(p)
    p.add_argument("--out", "-o", required=True, help="output directory")
    p.add_argument("--no-diagram", action="store_true", help="skip diagram.png (it needs Qt, drawn offscreen)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that holds no earlier report's manifest.json")
    add_figure_options(p)
    add_selective_options(p)       # --audit, --target-precision: selective.csv, audit.csv, thresholds.csv
    compare.add_compare_options(p)         # --compare, --reference: compare.csv


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
    from calibview.core.evaluation.engine import Engine
    from calibview.core.reports.folder import ReportFolder
    from calibview.core.reports.selective import check_target, parse_thresholds, write_selective
    from calibview.core.reports.tables import write_report

    audit = parse_thresholds(args.audit)
    check_target(args.target_precision)
    compare.prepare(args)         # refuses runs that cannot be compared before any work
    figure = None if args.no_diagram else figure_options(args)
    inputs = [eval_file(args)]
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "log_level", "quiet", "force")}
    folder = ReportFolder(args.out, inputs=inputs, settings=settings, force=args.force)   # refused before any work
    engine = Engine()
    evaluations = evaluate_all(args, engine)
    with folder:                          # written into a staging folder, moved into --out when complete
        _, messages = write_report(evaluations, folder.dir)
        _, notes = write_selective(engine, evaluations, folder.dir, audit, args.target_precision)
        if len({ev.request.eval_split for ev in evaluations}) > 1:
            write_domains(evaluations, engine, folder.dir)
        if args.compare:
            compare.write_compare(engine, evaluations, args, folder.dir, figure)
        firsts = first_settings(evaluations)
        if not args.no_diagram:
            write_diagrams(firsts, folder.dir, figure, engine)
    for note in notes:              # through the logger, so that --quiet leaves only errors on stderr
        logging.getLogger("calibview").warning(note)
    for message in messages + folder.notes:
        logging.getLogger("calibview").warning(f"note: {message}")
    for ev in firsts:
        log_calibrator_warnings(ev)
        print(summary_line(ev))
    for line in compare.summary(Path(args.out) / "compare.csv") if args.compare else []:
        print(line)
    print("wrote " + ", ".join(str(p) for p in folder.written))
    return 0


def write_domains(evaluations, engine, out: Path) -> Path:
    """domains.csv: each metric per eval split and its difference to the first split (see
    calibview.core.evaluation.domains)."""
    from calibview.core.evaluation.domains import domain_rows
    from calibview.core.reports.contrasts import domains_csv
    from calibview.core.io.safe_io import atomic_write

    rows = domain_rows(evaluations, lambda ev: engine.distributions(ev.request))
    atomic_write(out / "domains.csv", domains_csv(rows))
    return out / "domains.csv"


def write_diagrams(evaluations, out: Path, figure=None, engine=None) -> list[Path]:
    """diagram.png (one run) or diagram_<model>_<dataset>.png per run, drawn offscreen by calibview.plot's canvas;
    with ``figure`` (options, formats) one publication figure per format instead (calibview.plot.export)."""
    try:
        from calibview.plot.canvas import render_diagram_png
        from calibview.plot.export import render_figure
        from calibview.plot.figure import legend_numbers
        from calibview.plot.spec import calibrator_panels
    except ImportError as e:          # a headless install without Qt still gets the CSV and JSON
        logging.getLogger("calibview").warning(f"warning: no diagram.png ({e}); install PySide6 and pyqtgraph for it.")
        return []
    paths = []
    several_runs = len({(ev.run.file, ev.run.name) for ev in evaluations}) > 1
    several_splits = len({ev.request.eval_split for ev in evaluations}) > 1
    for ev in evaluations:
        parts = ([ev.run.name] if several_runs else []) + ([ev.request.eval_split] if several_splits else [])
        name = "_".join(["diagram"] + ["".join(c if c.isalnum() or c in "-." else "_" for c in p)
                                       for p in parts]) + ".png"
        title = f"{ev.run.name} · {ev.request.eval_split} (N = {ev.n_eval:,}, K = {ev.k})"
        if figure is not None:
            opts, formats = figure
            opts = dataclasses.replace(opts, title=title, extra={"bandwidth": f"{ev.request.bandwidth:g}",
                                                                  "kernel": ev.request.kernel})
            panels = calibrator_panels(ev.results, k=ev.k, layout=opts.layout,
                                       subtitle_of=lambda r: legend_numbers(r.metrics))
            paths += render_figure(panels, out / name, opts, bandwidth=ev.request.bandwidth,
                                   kernel=ev.request.kernel, formats=formats)
            if ev.k == 2 and engine is not None:       # binary: the positive-class diagram besides
                from calibview.plot.spec import positive_class_panels
                scored = engine.scored(ev.request)
                panels = positive_class_panels(ev.results, {nm: sc.stats for nm, sc in scored.items()},
                                               layout=opts.layout)
                paths += render_figure(panels, out / name.replace("diagram", "diagram_positive", 1), opts,
                                       bandwidth=ev.request.bandwidth, kernel=ev.request.kernel, formats=formats)
            continue
        render_diagram_png(list(ev.results), out / name, bandwidth=ev.request.bandwidth, kernel=ev.request.kernel,
                           title=title)
        paths.append(out / name)
    return paths


def summary_line(ev) -> str:
    """One line per run: error rate, ECE and NLL of every calibrator (and how often it moved the arg-max)."""
    parts = []
    for r in ev.results:
        m = r.metrics
        moved = f" (arg-max moved on {100 * r.argmax_changed:.1f}%)" if r.argmax_changed else ""
        parts.append(f"{r.name}: err {100 * (1 - m['accuracy'].value):.2f}% ECE {100 * m['ece'].value:.2f}% "
                     f"NLL {m['nll'].value:.4g}{moved}")
    return f"{ev.run.name} [{ev.request.eval_split}, N={ev.n_eval}, K={ev.k}] " + "; ".join(parts)
