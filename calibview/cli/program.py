"""The command line: ``calibview report|metrics|runs|import ...``. Uses the core only (no Qt).

User errors exit with status 2 and one sentence on stderr, never a traceback; a progress bar goes to stderr when
it is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from calibview._version import __version__
from calibview.cli import check, desktop_install, drift, release, slices
from calibview.core.io.demo import demo_path
from calibview.core.errors import Cancelled, CalibviewError
from calibview.startup import add_log_options, configure_openmp, setup_logging

EXIT_USER_ERROR = 2
#: the commands that live in a module of their own, in the order of --help
MODULE_COMMANDS = {"check": check, "desktop-install": desktop_install, "drift": drift, "release": release,
                   "slices": slices}
EXIT_INTERRUPTED = 130


class ProgressBar:
    """A one-line progress bar on stderr (only when stderr is a terminal, so logs stay clean)."""

    def __init__(self, enabled: Optional[bool] = None, width: int = 30) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.width, self.prefix, self._last = width, "", 0.0

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if fraction < 1.0 and now - self._last < 0.05:
            return
        self._last = now
        filled = int(round(self.width * fraction))
        line = f"\r{self.prefix}[{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:3.0f}% {message}"
        sys.stderr.write(line[:120].ljust(120))
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 120 + "\r")
            sys.stderr.flush()


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="HDF5 logits file, or a quoted glob of shards (default: the demo)")
    p.add_argument("--shards", metavar="GLOB", default=None,
                   help="several HDF5 files that together form the runs, e.g. 'logits-*.h5' (quoted)")
    p.add_argument("--run", action="append", metavar="MODEL/DATASET",
                   help="run to evaluate (repeatable; default: every run in the file)")
    p.add_argument("--fit-split", default=None, help="split the calibrators are fitted on (default: val)")
    p.add_argument("--eval-split", default=None,
                   help="split the metrics are computed on (default: test); a comma-separated list evaluates the "
                        "same fitted calibrators on each (domains: test,deploy), the first being the reference")
    p.add_argument("--calibrators", default=None,
                   help="comma-separated: none,ts,ts-grid,... (default: none,ts)")
    p.add_argument("--option", action="append", default=[], metavar="CAL.KEY=VALUE",
                   help="a calibrator option, repeatable: hb.bins=20, hb.strategy=quantile, ms.penalty=l2, "
                        "ms.lam=0.1, dirichlet.lam=auto, platt.smooth_targets=true")
    p.add_argument("--bins", default="15",
                   help="number of bins, or 'auto' (default: 15); a comma-separated list is an ablation: 10,15,20")
    p.add_argument("--bandwidth", default="0.05",
                   help="kernel bandwidth of the diagram and of CAL (default 0.05); a list is an ablation: "
                        "0.02,0.05,0.1")
    p.add_argument("--kernel", default="gaussian",
                   help="gaussian or epanechnikov (default gaussian); a list is an ablation: gaussian,epanechnikov")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per interval (0: none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed, 0 or more (default 0)")
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: auto)")
    p.add_argument("--max-memory", default="2G", metavar="SIZE",
                   help="a split larger than this in memory is streamed from disk in chunks (default 2G)")
    add_log_options(p)
    add_input_options(p)


def add_input_options(p: argparse.ArgumentParser) -> None:
    """What an untrusted input may do (calibview.core.io.guard): every command that reads a logits file takes these."""
    p.add_argument("--allow-external", action="append", default=[], metavar="PATH",
                   help="let the input's external links, external storage or virtual datasets read this file "
                        "(repeatable; only the files named)")
    p.add_argument("--allow-sparse", action="store_true",
                   help="read datasets whose chunks were never written or that inflate over 200x (over 256 MB)")


def _float_list(text: str, what: str) -> list[float]:
    out = []
    for item in str(text).split(","):
        try:
            out.append(float(item))
        except ValueError:
            raise CalibviewError(f"--{what} takes a number or a comma-separated list of numbers, not "
                                 f"{item.strip()!r}.") from None
    return out


def _list(text: str) -> list[str]:
    items = [t.strip() for t in str(text).split(",")]
    if not all(items):
        raise CalibviewError(f"{text!r} has an empty item; give a comma-separated list without gaps.")
    return list(dict.fromkeys(items))


def _settings(args) -> list:
    """The (bins, bandwidth, kernel) combinations of the command line: one, or an ablation grid."""
    from calibview.core.evaluation.engine import Setting

    bins = [b if b.lower() == "auto" else _int_or_text(b) for b in _list(args.bins)]
    bandwidths = list(dict.fromkeys(_float_list(args.bandwidth, "bandwidth")))
    kernels = [k.lower() for k in _list(args.kernel)]
    return [Setting(b, h, k) for b in bins for h in bandwidths for k in kernels]


def _int_or_text(text: str):
    try:
        return int(text)
    except ValueError:
        return text              # refused with the valid choices by the request check


def _add_figure_options(p) -> None:
    """The diagram files as publication figures (any of these options: the figure renderer, gui.figure)."""
    g = p.add_argument_group("figure", "diagram files as figures for papers and slides (light theme, vector PDF/SVG)")
    g.add_argument("--layout", choices=("overlay", "grid"),
                   help="overlay: every calibrator in one plot; grid: one panel per calibrator (default: overlay)")
    g.add_argument("--format", dest="figure_format", metavar="FMT[,FMT]",
                   help="diagram file formats among png, svg, pdf (default: png)")
    g.add_argument("--dpi", type=float, help="PNG resolution (default 300)")
    g.add_argument("--figure-width", metavar="WIDTH",
                   help="figure width: 3.5in (one column), 7in (two columns), 18cm, 2100px (default 7in)")
    g.add_argument("--font-size", type=float, metavar="PT", help="font size in points (default 8)")
    g.add_argument("--line-width", type=float, metavar="PT", help="curve width in points (default 1.2)")


def _figure_options(args):
    """FigureOptions from the command line, or None when no figure option was given (the classic diagram.png)."""
    given = [args.layout, args.figure_format, args.dpi, args.figure_width, args.font_size, args.line_width]
    if all(v is None for v in given):
        return None
    from calibview.plot.spec import FigureOptions, parse_formats, parse_length

    dpi = 300.0 if args.dpi is None else float(args.dpi)
    if not 10 <= dpi <= 2400:
        raise CalibviewError(f"--dpi {args.dpi:g} is out of range; choose between 10 and 2400")
    try:
        width = parse_length(args.figure_width or "7in", dpi)
        formats = parse_formats(args.figure_format or "png")
    except ValueError as e:
        raise CalibviewError(str(e)) from None
    opts = FigureOptions(width_in=width, dpi=dpi, layout=args.layout or "overlay",
                         font_pt=args.font_size or 8.0, line_width_pt=args.line_width or 1.2)
    return opts, formats


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calibview", description="Calibration and sharpness of stored classifier logits.")
    parser.add_argument("--version", action="version", version=f"calibview {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("report", help="write metrics.csv, curves.csv and calibrators.json for every run")
    _add_eval_options(p)
    p.add_argument("--out", "-o", required=True, help="output directory")
    p.add_argument("--no-diagram", action="store_true", help="skip diagram.png (it needs Qt, drawn offscreen)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that holds no earlier report's manifest.json")
    _add_figure_options(p)
    from calibview.core.reports.selective import add_report_options
    add_report_options(p)          # --audit, --target-precision: selective.csv, audit.csv, thresholds.csv
    from calibview.cli.compare import add_compare_options
    add_compare_options(p)         # --compare, --reference: compare.csv

    p = sub.add_parser("metrics", help="print the metric rows (as JSON with --json, else a table)")
    _add_eval_options(p)
    p.add_argument("--json", action="store_true", help="print JSON rows to stdout")

    p = sub.add_parser("runs", help="list the runs and splits in a file (metadata only)")
    p.add_argument("file", nargs="?", help="HDF5 logits file (default: the bundled demo)")
    add_input_options(p)

    p = sub.add_parser("apply", help="apply a fitted calibrator (JSON) to a split and write its probabilities")
    p.add_argument("calibrator", help="calibrators.json of a report, one calibrator's JSON, or the "
                                      "inference_config.json of a release")
    p.add_argument("file", help="HDF5 logits file to calibrate")
    p.add_argument("--run", required=True, metavar="MODEL/DATASET")
    p.add_argument("--split", required=True)
    p.add_argument("--calibrator-name", "--use", dest="use", default=None,
                   help="which calibrator of a report's calibrators.json (default: the only non-'none' one of the "
                        "run)")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None, help="model name in the output (default: MODEL+CALIBRATOR)")
    p.add_argument("--overwrite", action="store_true", help="replace the split if OUT already has it")
    p.add_argument("--allow-other-run", action="store_true",
                   help="apply a calibrator fitted on another run (a warning; K and class names must match)")
    add_input_options(p)

    p = sub.add_parser("import", help="convert .npz, .npy pairs or .pt logits into a calibview HDF5 file")
    p.add_argument("src", help="source file (.npz, .npy, .pt, .pth)")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None)
    p.add_argument("--dataset", default=None)
    p.add_argument("--split", default=None)
    p.add_argument("--overwrite", action="store_true", help="replace splits that OUT already has")
    add_input_options(p)

    for name, module in MODULE_COMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=module.HELP))
    return parser


def parse_options(items) -> tuple:
    """``["hb.bins=20", "ms.penalty=l2"]`` -> the nested-tuple form of EvalRequest.options."""
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        name, dot, opt = key.partition(".")
        if not (sep and dot and name and opt):
            raise CalibviewError(f"--option {item!r} is not of the form CALIBRATOR.KEY=VALUE (e.g. hb.bins=20).")
        out.setdefault(name.strip(), {})[opt.strip()] = _option_value(value.strip())
    return tuple((name, tuple(opts.items())) for name, opts in out.items())


def _option_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _requests(args) -> list:
    from calibview.core import calibrators as calib
    from calibview.core.io import logits as lg
    from calibview.core.evaluation.request import EvalRequest, default_splits
    from calibview.core.io.stream import parse_size

    from calibview.core.io import shards

    if args.shards and args.file:
        raise CalibviewError("Give either FILE or --shards, not both.")
    file = args.shards or args.file or str(demo_path())
    runs = (shards if shards.is_pattern(file) else lg).list_runs(file)
    chosen = [lg.find_run(runs, name) for name in args.run] if args.run else runs
    explicit = args.calibrators is not None
    names = tuple(c.strip() for c in (args.calibrators if explicit else "none,ts").split(",") if c.strip())
    if not names:
        raise CalibviewError("--calibrators is empty; give a comma-separated list such as none,ts.")
    options = parse_options(args.option)
    for name, opts in options:
        if name not in names:
            raise CalibviewError(f"--option for {name!r}, which is not among --calibrators ({', '.join(names)}).")
        calib.configured(name, dict(opts))
    for name in names:
        calib.get(name)
    eval_splits = _list(args.eval_split) if args.eval_split else [None]
    requests = []
    for run in chosen:
        evals = [default_splits(run, e)[1] for e in eval_splits]
        for name in evals + ([args.fit_split] if args.fit_split else []):
            run.split(name)                      # a split the run lacks is refused before any work
        fit_split = args.fit_split or _default_fit(run, evals)
        eval_split = evals[0]
        run_names = names
        binary = [c for c in names if calib.get(c).binary_only]
        if binary and run.k != 2:
            run_names = tuple(c for c in names if c not in binary)
            print(f"calibview: run {run.name} has K = {run.k} classes: skipping {', '.join(binary)} "
                  "(binary problems only).", file=sys.stderr)
        if fit_split is None and any(c != "none" for c in run_names):
            if explicit:
                raise CalibviewError(
                    f"Run {run.name} in {file} has only the split {eval_split!r}, so there is nothing to fit "
                    "calibrators on; add a fit split to the file or pass --fit-split explicitly.")
            run_names = ("none",)
            print(f"calibview: run {run.name} has a single split: reporting it uncalibrated.", file=sys.stderr)
        if fit_split in evals:                   # as the window warns; once per calibrator
            for c in run_names:
                if c != "none":
                    logging.getLogger("calibview").warning(
                        f"warning: run {run.name}: {c} was fitted and evaluated on the same split ({fit_split}): "
                        "these are in-sample numbers.")
        first = _settings(args)[0]
        for eval_split in evals:                 # one request per domain: the engine fits once for all of them
            requests.append(EvalRequest(file=str(file), run=run.name, eval_split=eval_split, fit_split=fit_split,
                                        calibrators=run_names, bins=first.bins, n_boot=args.n_boot,
                                        seed=args.seed, level=args.level, bandwidth=first.bandwidth,
                                        kernel=first.kernel, device=args.device, options=options,
                                        max_memory=parse_size(args.max_memory)))
    return requests


def _default_fit(run, evals: list[str]) -> Optional[str]:
    """The fit split when none is named: "val" (else the first split) among those not evaluated on; with every
    split evaluated on, what a single evaluation split would get."""
    from calibview.core.evaluation.request import default_splits

    others = [s.name for s in run.splits if s.name not in evals]
    if others:
        return "val" if "val" in others else others[0]
    return default_splits(run, evals[0])[0]


def _evaluate_all(args, engine=None) -> list:
    """Every run's evaluations, one per eval split and setting of the command line (an ablation and the domains
    share fits and scores); pass an ``engine`` to reuse its cache afterwards."""
    from calibview.core.evaluation.engine import Engine
    from calibview.core.evaluation.request import check_request
    from dataclasses import replace

    settings = _settings(args)
    requests = _requests(args)
    for req in requests:                  # every request and setting is checked before any work starts
        for s in settings:
            check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
    bar = ProgressBar(enabled=False if args.quiet else None)
    cancel = threading.Event()
    engine = engine if engine is not None else Engine()
    results = []
    try:
        for i, req in enumerate(requests):
            bar.prefix = f"{req.run} ({i + 1}/{len(requests)}) "
            results.extend(engine.evaluate_settings(req, settings, progress=bar, cancel=cancel))
    finally:
        bar.done()
    return results


def _cmd_report(args) -> int:
    from calibview.core.evaluation.engine import Engine
    from calibview.core.reports.tables import write_report
    from calibview.core.reports.folder import ReportFolder
    from calibview.core.reports.selective import check_target, parse_thresholds, write_selective

    from calibview.cli import compare as _compare

    audit = parse_thresholds(args.audit)
    check_target(args.target_precision)
    _compare.prepare(args, _requests)         # refuses runs that cannot be compared before any work
    figure = None if args.no_diagram else _figure_options(args)
    inputs = [args.shards or args.file or str(demo_path())]
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "log_level", "quiet", "force")}
    folder = ReportFolder(args.out, inputs=inputs, settings=settings, force=args.force)   # refused before any work
    engine = Engine()
    evaluations = _evaluate_all(args, engine)
    with folder:                          # written into a staging folder, moved into --out when complete
        _, messages = write_report(evaluations, folder.dir)
        _, notes = write_selective(engine, evaluations, folder.dir, audit, args.target_precision)
        if len({ev.request.eval_split for ev in evaluations}) > 1:
            _write_domains(evaluations, engine, folder.dir)
        if args.compare:
            _compare.write_compare(engine, evaluations, args, folder.dir, figure)
        firsts = _first_settings(evaluations)
        if not args.no_diagram:
            _write_diagrams(firsts, folder.dir, figure, engine)
    for note in notes:
        print(f"calibview: {note}", file=sys.stderr)
    for message in messages + folder.notes:
        logging.getLogger("calibview").warning(f"note: {message}")
    for ev in firsts:
        _log_calibrator_warnings(ev)
        print(_summary_line(ev))
    for line in _compare.summary(Path(args.out) / "compare.csv") if args.compare else []:
        print(line)
    print("wrote " + ", ".join(str(p) for p in folder.written))
    return 0


def _write_domains(evaluations, engine, out: Path) -> Path:
    """domains.csv: each metric per eval split and its difference to the first split (see core.domains)."""
    from calibview.core.evaluation.domains import domain_rows, domains_csv
    from calibview.core.reports.tables import atomic_write

    rows = domain_rows(evaluations, lambda ev: engine.distributions(ev.request))
    atomic_write(out / "domains.csv", domains_csv(rows))
    return out / "domains.csv"


def _first_settings(evaluations) -> list:
    """The evaluation of the first setting of each run (an ablation has one per setting)."""
    seen, out = set(), []
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.fit_split, ev.request.eval_split)
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return out


def _write_diagrams(evaluations, out: Path, figure=None, engine=None) -> list[Path]:
    """diagram.png (one run) or diagram_<model>_<dataset>.png per run, drawn offscreen by the GUI's canvas; with
    ``figure`` (options, formats) one publication figure per format instead (gui.figure_export)."""
    try:
        from calibview.plot.canvas import render_diagram_png
        from calibview.plot.figure import legend_numbers
        from calibview.plot.export import render_figure
        from calibview.plot.spec import calibrator_panels
    except ImportError as e:          # a headless install without Qt still gets the CSV and JSON
        print(f"calibview: warning: no diagram.png ({e}); install PySide6 and pyqtgraph for it.", file=sys.stderr)
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


def _log_calibrator_warnings(ev) -> None:
    """The fitted calibrators' warnings on stderr (report and metrics alike; --quiet silences them)."""
    for r in ev.results:
        for w in r.warnings:
            logging.getLogger("calibview").warning(f"warning: {ev.run.name} {r.name}: {w}")


def _summary_line(ev) -> str:
    parts = []
    for r in ev.results:
        m = r.metrics
        moved = f" (arg-max moved on {100 * r.argmax_changed:.1f}%)" if r.argmax_changed else ""
        parts.append(f"{r.name}: err {100 * (1 - m['accuracy'].value):.2f}% ECE {100 * m['ece'].value:.2f}% "
                     f"NLL {m['nll'].value:.4g}{moved}")
    return f"{ev.run.name} [{ev.request.eval_split}, N={ev.n_eval}, K={ev.k}] " + "; ".join(parts)


def _cmd_metrics(args) -> int:
    from calibview.core.reports.tables import metrics_json, metrics_rows

    evaluations = _evaluate_all(args)
    for ev in _first_settings(evaluations):
        _log_calibrator_warnings(ev)
    rows = metrics_rows(evaluations)
    if args.json:
        sys.stdout.write(metrics_json(rows))
    else:
        cols = ("accuracy", "nll", "brier", "ece", "ace", "classwise_ece", "smece", "cal", "tot",
                "sharpness_gap")
        ablation = len({(r["bins"], r["bandwidth"], r["kernel"]) for r in rows}) > 1
        domains = len({r["eval_split"] for r in rows}) > 1

        def setting(row) -> str:
            return f"{row['bins']:>4} {row['bandwidth']:<7g} {row['kernel'][:5]:5s} " if ablation else ""

        head = f"{'run':32s} " + ("split      " if domains else "") + f"{'calibrator':10s} " + \
            ("bins bw      kern. " if ablation else "") + " ".join(f"{c[:13]:>13s}" for c in cols)
        print(head)
        for row in rows:
            run = f"{row['model']}/{row['dataset']}"
            split = f"{row['eval_split'][:10]:10s} " if domains else ""
            print(f"{run[:32]:32s} {split}{row['calibrator'][:10]:10s} " + setting(row) +
                  " ".join(f"{row[c]:13.6g}" for c in cols))
    return 0


def _cmd_runs(args) -> int:
    from calibview.core.io import logits as lg

    file = args.file or str(demo_path())
    for run in lg.list_runs(file):
        splits = ", ".join(f"{s.name} (N={s.n}, {s.kind}, {s.dtype}"
                           + (f"; meta: {' '.join(s.meta)}" if s.meta else "") + ")" for s in run.splits)
        print(f"{run.name}\tK={run.k}\t{splits}")
    return 0


def _load_calibrator(path: str, run, use: Optional[str], allow_other_run: bool = False):
    """One calibrator from a JSON file: a single calibrator, a report's list (picked by run and name; the schema,
    run, K and class names are checked by calibview.core.calibrators.file), or a verified inference config (its run
    must be ``run``)."""
    from calibview.core import calibrators as calib
    from calibview.core.calibrators import file as calibrator_file

    obj = calibrator_file.load_json(           # a missing, binary or HDF5 file is one sentence naming it
        path, "a calibrators JSON or inference config",
        "give the calibrators.json of calibview report or the inference_config.json of calibview release")
    if isinstance(obj, dict) and "schema" in obj and obj["schema"] != calibrator_file.SCHEMA:
        from calibview.core.release import config as rel       # an inference config of calibview release

        config = rel.verify_config(obj, path)
        if rel.run_name(config) != run.name:
            raise CalibviewError(f"{path} was released for run {rel.run_name(config)}, not {run.name}; apply it to "
                                 "the run of the same model.")
        return rel.calibrator_of(config)
    record, warnings = calibrator_file.choose(path, obj, run, use, allow_other_run=allow_other_run)
    for w in warnings:
        logging.getLogger("calibview").warning(f"warning: {w}")
    try:
        return calib.from_json(record)
    except CalibviewError as e:
        raise CalibviewError(f"{path}: {str(e)[0].lower()}{str(e)[1:]}") from None


def _cmd_apply(args) -> int:
    import numpy as np
    import torch

    from calibview.core.io import logits as lg
    from calibview.core.evaluation.request import scores_tensor
    from calibview.core.stats.metrics import chunk_rows

    from calibview.core.io.safe_io import refuse_overwriting_inputs

    refuse_overwriting_inputs([args.out], [args.file, args.calibrator])
    run = lg.find_run(args.file, args.run)
    fitted = _load_calibrator(args.calibrator, run, args.use, args.allow_other_run)
    data = lg.read_split(args.file, run, args.split)
    if data.scores.shape[1] != fitted.k:
        raise CalibviewError(f"The calibrator in {args.calibrator} was fitted on K = {fitted.k} classes but "
                             f"{run.name}/{args.split} in {args.file} has K = {data.scores.shape[1]}.")
    scores = scores_tensor(data)          # no copy of logits; probabilities become log-probabilities
    probs = np.empty(scores.shape, dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, scores.shape[0], rows := chunk_rows(scores.shape[1])):
            probs[start:start + rows] = fitted.apply(scores[start:start + rows]).exp().numpy()
    model = args.model or f"{run.model}+{fitted.method}"
    attrs = {"calibrated_from": f"{args.file}:{run.path}/{args.split}", "calibrator": fitted.method}
    lg.write_run(args.out, model, run.dataset or "data", args.split, probs=probs, labels=data.labels,
                 class_names=run.class_names, attrs=attrs, overwrite=args.overwrite)
    print(f"{args.out}: {model}/{run.dataset or 'data'}/{args.split} (N={probs.shape[0]}, K={probs.shape[1]}, "
          f"{fitted.label})")
    return 0


def _cmd_import(args) -> int:
    from calibview.core.io.importers import import_arrays

    runs = import_arrays(args.src, args.out, model=args.model, dataset=args.dataset, split=args.split,
                         overwrite=args.overwrite)
    for run in runs:
        print(f"{args.out}: {run.name} " + ", ".join(f"{s.name} (N={s.n}, K={s.k})" for s in run.splits))
    return 0


COMMANDS = {"report": _cmd_report, "metrics": _cmd_metrics, "runs": _cmd_runs, "apply": _cmd_apply,
            "import": _cmd_import, **{name: module.run for name, module in MODULE_COMMANDS.items()}}


def opens_window(argv: Sequence[str]) -> bool:
    """Whether ``calibview ARGV`` opens the window: no argument, an option first (``--run R``, Qt's ``-style``) or
    something that names a file (it exists, or has a path separator or a suffix: ``f.h5``, ``./logits``). A bare
    word that is neither a command nor a file (``calibview reprot f.h5``) is a mistyped command, for argparse to
    refuse with the list of commands, rather than a window with "file does not exist" dialogs for every word."""
    if not argv:
        return True
    first = argv[0]
    if first in COMMANDS or first in ("-h", "--help", "--version"):
        return False
    if first.startswith("-"):
        return True
    return Path(first).exists() or "/" in first or "\\" in first or "." in first


def main(argv: Optional[Sequence[str]] = None) -> int:
    configure_openmp()              # before anything loads torch (see calibview.startup)
    argv = list(sys.argv[1:] if argv is None else argv)
    if opens_window(argv):
        # `calibview`, `calibview FILE ...` and `calibview --run R --calibrators ts,vs` open the desktop app (the
        # bundled demo when no file is given).
        from calibview.gui.app import main as gui_main
        return gui_main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    from calibview.core.io.stream import tune_allocator
    tune_allocator()                # a process-wide choice, so the program makes it, not the import of the core
    if hasattr(args, "log_level"):
        setup_logging(args)
    policy = contextlib.nullcontext()
    if hasattr(args, "allow_external"):     # what the input may do (core.guard), for this command only
        from calibview.core.io import guard
        policy = guard.using(args.allow_external, args.allow_sparse)
    try:
        with policy:
            return COMMANDS[args.command](args)
    except Cancelled:
        print("calibview: cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("\ncalibview: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CalibviewError as e:
        print(f"calibview: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (OSError, ValueError) as e:
        print(f"calibview: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
