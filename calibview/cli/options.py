"""What the commands share: their options, the requests built from them, the evaluation of every request with a
progress bar, and the command line's wording of core errors.

Every default comes from the core: EvalRequest's and the slices' from :mod:`calibview.core.evaluation.defaults`,
the release's limits from :mod:`calibview.core.release.limits`, plain data in modules that load neither torch nor
numpy, so ``--help`` and an argument error load neither; the help texts are built from them. The core is imported
inside the functions, so a command module stays cheap to import.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import threading
import time
from typing import Optional

from calibview.core.errors import CalibviewError
from calibview.core.io.demo import demo_path
from calibview.startup import add_log_options

#: the flag of a core parameter whose name is not the flag's (``--name-with-dashes`` otherwise)
FLAGS = {"out_dir": "--out"}


def request_defaults() -> dict:
    """EvalRequest's defaults by field name (calibview.core.evaluation.defaults defines them; it and the memory
    module import nothing heavy, so ``--help`` and an argument error load neither torch nor numpy); ``max_memory``
    (None in the request: the streaming threshold) is that threshold in bytes."""
    from calibview.core.evaluation import defaults
    from calibview.core.io.memory import DEFAULT_MAX_MEMORY

    return {"eval_split": defaults.EVAL_SPLIT, "fit_split": defaults.FIT_SPLIT, "calibrators": defaults.CALIBRATORS,
            "bins": defaults.BINS, "n_boot": defaults.N_BOOT, "seed": defaults.SEED, "level": defaults.LEVEL,
            "interval": defaults.INTERVAL,
            "bandwidth": defaults.BANDWIDTH, "kernel": defaults.KERNEL, "device": defaults.DEVICE,
            "max_memory": DEFAULT_MAX_MEMORY}


def size_text(nbytes: int) -> str:
    """Bytes as the largest unit that divides them exactly: 2 << 30 -> ``"2G"`` (what ``--max-memory`` takes)."""
    for unit, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


class ProgressBar:
    """A one-line progress bar on stderr (only when stderr is a terminal, so logs stay clean); call it as
    ``progress(fraction in [0, 1], message)``."""

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
        """Clear the bar's line."""
        if self.enabled:
            sys.stderr.write("\r" + " " * 120 + "\r")
            sys.stderr.flush()


def add_run_options(p: argparse.ArgumentParser) -> None:
    """FILE (or --shards) and --run: which runs of which input the command evaluates."""
    p.add_argument("file", nargs="?", help="HDF5 logits file, or a quoted glob of shards (default: the demo)")
    p.add_argument("--shards", metavar="GLOB", default=None,
                   help="several HDF5 files that together form the runs, e.g. 'logits-*.h5' (quoted)")
    p.add_argument("--run", action="append", metavar="MODEL/DATASET",
                   help="run to evaluate (repeatable; default: every run in the file)")


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """The options of the commands that evaluate runs (report, metrics, slices): the input, the runs and splits,
    the calibrators, the settings of the metrics and intervals, logging and what the input may do."""
    d = request_defaults()
    add_run_options(p)
    p.add_argument("--fit-split", default=None,
                   help=f"split the calibrators are fitted on (default: {d['fit_split']})")
    p.add_argument("--eval-split", default=None,
                   help=f"split the metrics are computed on (default: {d['eval_split']}); a comma-separated list "
                        "evaluates the same fitted calibrators on each (domains: test,deploy), the first being the "
                        "reference")
    p.add_argument("--calibrators", default=None,
                   help=f"comma-separated: none,ts,ts-grid,... (default: {','.join(d['calibrators'])})")
    p.add_argument("--option", action="append", default=[], metavar="CAL.KEY=VALUE",
                   help="a calibrator option, repeatable: hb.bins=20, hb.strategy=quantile, ms.penalty=l2, "
                        "ms.lam=0.1, dirichlet.lam=auto, platt.smooth_targets=true")
    p.add_argument("--bins", default=str(d["bins"]),
                   help=f"number of bins, or 'auto' (default: {d['bins']}); a comma-separated list is an ablation: "
                        "10,15,20")
    bandwidth = f"{d['bandwidth']:g}"
    p.add_argument("--bandwidth", default=bandwidth,
                   help=f"kernel bandwidth of the diagram and of CAL (default {bandwidth}); a list is an ablation: "
                        "0.02,0.05,0.1")
    p.add_argument("--kernel", default=d["kernel"],
                   help=f"gaussian or epanechnikov (default {d['kernel']}); a list is an ablation: "
                        "gaussian,epanechnikov")
    p.add_argument("--n-boot", type=int, default=d["n_boot"], help="bootstrap resamples per interval (0: none)")
    p.add_argument("--seed", type=int, default=d["seed"], help=f"bootstrap seed, 0 or more (default {d['seed']})")
    p.add_argument("--level", type=float, default=d["level"], help=f"interval level (default {d['level']:g})")
    p.add_argument("--bootstrap", choices=("multinomial", "poisson"), help="how resamples are drawn: multinomial "
                   "(default), or poisson: a weight per sample drawn per shard (the only choice with --engine dask)")
    p.add_argument("--interval", choices=("auto", "percentile", "basic", "bca"), default=d["interval"],
                   help="how intervals are read off the resamples: auto (default) is the basic interval, clipped at "
                        "0, for the binned calibration errors and percentile for the rest; or one method for all")
    p.add_argument("--device", default=d["device"], help=f"cpu, cuda or auto (default: {d['device']})")
    memory = size_text(d["max_memory"])
    p.add_argument("--max-memory", default=memory, metavar="SIZE",
                   help=f"a split larger than this in memory is streamed from disk in chunks (default {memory})")
    from calibview.cli.regression.commands import add_regression_options

    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local (default), or dask: score the --shards on a Dask cluster (pip install calibview[dask])")
    p.add_argument("--scheduler", default="local", metavar="ADDRESS|local[:WORKERS]",
                   help="with --engine dask: a running scheduler's address, or local[:N] to start N worker processes")
    add_regression_options(p)           # --reg-bandwidth, --allow-crossing
    add_log_options(p)
    add_input_options(p)


def add_member_options(p: argparse.ArgumentParser, rank: bool = False) -> None:
    """``--members`` (which rows a run with members gets) and, with ``rank``, ``--rank-by`` (how selective
    prediction orders the samples of such a run)."""
    p.add_argument("--members", choices=("all", "ensemble", "none"), default=None,
                   help="rows of a run with members (an ensemble or MC-dropout passes): all (default: the "
                        "ensemble, then the deterministic scores if stored, then each member), ensemble (its row "
                        "only), none (the ensemble read as a plain run, no member column)")
    if rank:
        p.add_argument("--rank-by", choices=("confidence", "entropy", "mi"), default="confidence",
                       help="order of selective.csv for a run with members: the confidence (default), the total "
                            "predictive entropy or the mutual information of its members")


def add_input_options(p: argparse.ArgumentParser) -> None:
    """What an untrusted input may do (calibview.core.io.guard): every command that reads a logits file takes these."""
    p.add_argument("--allow-external", action="append", default=[], metavar="PATH",
                   help="let the input's external links, external storage or virtual datasets read this file "
                        "(repeatable; only the files named)")
    p.add_argument("--allow-sparse", action="store_true",
                   help="read datasets whose chunks were never written or that inflate over 200x (over 256 MB)")
    p.add_argument("--allow-large-read", action="store_true",
                   help="read datasets whose layout costs more than the read budget (--max-memory) to read: "
                        "very many small chunks, very long metadata (still read in bounded blocks)")


def add_lock_options(p: argparse.ArgumentParser) -> None:
    """``--lock-timeout``: how long a command that writes an output waits for another calibview process writing
    the same output (calibview.core.io.durable.locks)."""
    from calibview.core.io.durable.locks import LOCK_TIMEOUT

    p.add_argument("--lock-timeout", type=float, default=LOCK_TIMEOUT, metavar="SECONDS",
                   help=f"wait this long for another calibview process writing the same output, then refuse "
                        f"(default {LOCK_TIMEOUT:g})")


def add_common_options(p: argparse.ArgumentParser) -> None:
    """The options of the release, check and drift commands besides their own: the device, logging and what the
    input may do."""
    device = request_defaults()["device"]
    p.add_argument("--device", default=device, help=f"cpu, cuda or auto (default: {device})")
    add_log_options(p)
    add_input_options(p)          # --allow-external, --allow-sparse (calibview.core.io.guard)


def add_figure_options(p: argparse.ArgumentParser) -> None:
    """The diagram files as publication figures (any of these options: the figure renderer, calibview.plot)."""
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


def figure_options(args):
    """(FigureOptions, formats) from the figure options, or None when none was given (the classic diagram.png)."""
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


def _int_or_text(text: str):
    try:
        return int(text)
    except ValueError:
        return text              # refused with the valid choices by the request check


def settings_from_args(args) -> list:
    """The (bins, bandwidth, kernel) Settings of the command line: one, or an ablation grid (bins outermost)."""
    from calibview.core.evaluation.request import Setting

    bins = [b if b.lower() == "auto" else _int_or_text(b) for b in _list(args.bins)]
    bandwidths = list(dict.fromkeys(_float_list(args.bandwidth, "bandwidth")))
    kernels = [k.lower() for k in _list(args.kernel)]
    return [Setting(b, h, k) for b in bins for h in bandwidths for k in kernels]


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


def eval_file(args) -> str:
    """The input of an evaluating command: FILE, the --shards glob, or the bundled demo."""
    return args.shards or args.file or str(demo_path())


def requests_from_args(args) -> list:
    """The EvalRequests of the command line, one per run and eval split, each with the first setting; a run,
    split, calibrator or option that cannot work is refused before any work."""
    from calibview.core import calibrators as calib
    from calibview.core.evaluation.request import EvalRequest, default_bootstrap, default_splits
    from calibview.core.io import discovery, shards
    from calibview.core.io.memory import parse_size
    from calibview.core.evaluation.toplabel.absent import is_toplabel, skipped_note, usable_calibrators

    if args.shards and args.file:
        raise CalibviewError("Give either FILE or --shards, not both.")
    file = eval_file(args)
    runs = (shards if shards.is_pattern(file) else discovery).list_runs(file)
    from calibview.cli.regression import commands as regression

    run_names = regression.classification_run_names(args, file, runs)    # those naming regression runs left out
    chosen = [discovery.find_run(runs, name) for name in run_names] if run_names is not None else runs
    explicit = args.calibrators is not None
    given = args.calibrators if explicit else ",".join(request_defaults()["calibrators"])
    names = tuple(c.strip() for c in given.split(",") if c.strip())
    if not names:
        raise CalibviewError("--calibrators is empty; give a comma-separated list such as none,ts.")
    names = regression.classification_calibrators(names, bool(chosen))
    if not names:                       # regression recalibrators only: the classification runs are not evaluated
        return []
    from calibview.core.evaluation.defaults import KNOWN_CALIBRATORS

    for name in names:                  # the registry (and torch) is not loaded for a typo
        if name not in KNOWN_CALIBRATORS:
            raise CalibviewError(f"Unknown calibrator {name!r}; choose from {', '.join(KNOWN_CALIBRATORS)}.")
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
        fit_split = args.fit_split or default_fit(run, evals)
        eval_split = evals[0]
        run_names, skipped = usable_calibrators(run, names)     # a top-label run takes no logit calibrators
        if skipped:
            logging.getLogger("calibview").warning(skipped_note(run, skipped))
            run_names = run_names or ("none",)
        binary = [c for c in run_names if calib.get(c).binary_only and not is_toplabel(run)]
        if binary and run.k != 2:
            run_names = tuple(c for c in names if c not in binary)
            logging.getLogger("calibview").warning(f"run {run.name} has K = {run.k} classes: skipping "
                                                   f"{', '.join(binary)} (binary problems only).")
        if fit_split is None and any(c != "none" for c in run_names):
            if explicit:
                raise CalibviewError(
                    f"Run {run.name} in {file} has only the split {eval_split!r}, so there is nothing to fit "
                    "calibrators on; add a fit split to the file or pass --fit-split explicitly.")
            run_names = ("none",)
            logging.getLogger("calibview").warning(f"run {run.name} has a single split: reporting it uncalibrated.")
        if fit_split in evals:                   # as the window warns; once per calibrator
            for c in run_names:
                if c != "none":
                    logging.getLogger("calibview").warning(
                        f"warning: run {run.name}: {c} was fitted and evaluated on the same split ({fit_split}): "
                        "these are in-sample numbers.")
        first = settings_from_args(args)[0]
        for eval_split in evals:                 # one request per domain: the engine fits once for all of them
            requests.append(EvalRequest(file=str(file), run=run.name, eval_split=eval_split, fit_split=fit_split,
                                        calibrators=run_names, bins=first.bins, n_boot=args.n_boot,
                                        seed=args.seed, level=args.level, interval=args.interval,
                                        bandwidth=first.bandwidth,
                                        kernel=first.kernel, device=args.device, options=options,
                                        max_memory=parse_size(args.max_memory),
                                        bootstrap=args.bootstrap or default_bootstrap(args.engine)))
    return requests


def default_fit(run, evals: list[str]) -> Optional[str]:
    """The fit split when none is named: the default fit split ("val", else the first split) among those not
    evaluated on; with every split evaluated on, what a single evaluation split would get."""
    from calibview.core.evaluation.request import default_splits

    others = [s.name for s in run.splits if s.name not in evals]
    if others:
        fit = request_defaults()["fit_split"]
        return fit if fit in others else others[0]
    return default_splits(run, evals[0])[0]


def evaluate_all(args, engine=None) -> list:
    """Every run's evaluations, one per eval split and setting of the command line (an ablation and the domains
    share fits and scores); pass an ``engine`` to reuse its cache afterwards."""
    from dataclasses import replace

    from calibview.core.evaluation.request import check_request

    settings = settings_from_args(args)
    requests = member_expanded(requests_from_args(args), getattr(args, "members", None))
    for req in requests:                  # every request and setting is checked before any work starts
        for s in settings:
            check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
    if engine is None and getattr(args, "engine", "local") == "dask":
        with engine_for(args) as engine:
            return evaluate_all(args, engine)
    # torch loads only now: a command refused above (a missing file, a bad flag value) answers in a blink
    from calibview.core.evaluation.engine import Engine

    announce_cost(requests)
    bar = ProgressBar(enabled=False if args.quiet else None)
    cancel = threading.Event()
    own, engine = engine is None, engine if engine is not None else Engine()
    results = []
    try:
        for i, req in enumerate(requests):
            bar.prefix = f"{req.run} ({i + 1}/{len(requests)}) "
            results.extend(evs := engine.evaluate_settings(req, settings, progress=bar, cancel=cancel))
            if own:                       # nothing reads this engine after the command
                engine.forget_run(evs[-1], unless=requests[i + 1:])
    finally:
        bar.done()
    return results


def engine_for(args):
    """A context manager yielding the engine of ``--engine``: a fresh local Engine, or a Dask engine on
    ``--scheduler`` (a local cluster is closed on exit), refused before a cluster starts if it cannot help."""
    import contextlib

    if getattr(args, "engine", "local") != "dask":
        from calibview.core.evaluation.engine import Engine
        return contextlib.nullcontext(Engine())
    from calibview.core.distributed import client, shards

    client.require_dask()
    shards.check_request(eval_file(args), args.n_boot, args.bootstrap or "poisson")
    from calibview.core.distributed.engine import open_engine
    return open_engine(args.scheduler)


def member_expanded(requests: list, selection: Optional[str]) -> list:
    """Each request followed by those of its run's member rows (``--members``; see
    calibview.core.evaluation.members.requests); ``none`` marks the requests as plain runs (no member rows)."""
    from calibview.core.evaluation.members.requests import member_requests
    from calibview.core.io import discovery, shards

    if selection in ("none", "ensemble"):
        return list(requests)
    out = []
    for req in requests:                    # a glob of shards has no members
        out += ([req] if shards.is_pattern(req.file)
                else member_requests(req, discovery.find_run(req.file, req.run), selection))
    return out


def member_rows(evaluations, selection: Optional[str]) -> list:
    """The metric rows of ``evaluations`` (metrics --json, metrics.csv); ``--members none`` leaves their
    ``member`` column empty, as for a run without members."""
    from calibview.core.reports.tables import metrics_rows

    rows = metrics_rows(evaluations)
    if selection == "none":
        for row in rows:
            row["member"] = None
    return rows


def ensemble_only(evaluations) -> list:
    """The evaluations of the runs' predictions (a run's ensemble, not its member rows): what the diagrams,
    curves, rankings and contrasts show."""
    return [ev for ev in evaluations if ev.request.member is None]


def announce_cost(requests) -> None:
    """Refuse a bootstrap above the memory budget (CalibviewError), then say on stderr (a warning: --quiet
    silences it) what a long one will cost, before any work starts."""
    from calibview.core.evaluation import cost
    from calibview.core.io import discovery, shards
    estimates = []
    for req in requests:
        if not req.n_boot:
            continue
        info = discovery.find_run(shards.list_runs(req.file) if shards.is_pattern(req.file) else req.file, req.run)
        est = cost.bootstrap_cost(info.split(req.eval_split).n, info.k, req.n_boot, len(req.calibrators))
        cost.check_bootstrap(est, cost.budget(req.max_memory), req.n_boot)
        estimates.append((req, est))
    for req, est in estimates:
        if est.seconds > cost.ANNOUNCE_S:
            logging.getLogger("calibview").warning(
                f"warning: run {req.run}: {req.n_boot} resamples will take {est.describe()} (estimated); "
                "lower --n-boot for a quicker answer, or Ctrl-C to stop.")


def first_settings(evaluations) -> list:
    """The evaluation of the first setting of each run and split (an ablation has one per setting)."""
    seen, out = set(), []
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.fit_split, ev.request.eval_split, ev.request.member)
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return out


def log_calibrator_warnings(ev) -> None:
    """The fitted calibrators' warnings on stderr (report and metrics alike; --quiet silences them)."""
    for r in ev.results:
        for w in r.warnings:
            logging.getLogger("calibview").warning(f"warning: {ev.run.name} {r.name}: {w}")


def flag_message(error: CalibviewError) -> str:
    """The error's message as the command line says it: each parameter a ParameterError names becomes its flag
    (``target_precision`` -> ``--target-precision``, ``device=cuda`` -> ``--device cuda``, ``force=True`` ->
    ``--force``); any other error's message as it is."""
    text = str(error)
    for name in getattr(error, "parameters", ()):
        flag = FLAGS.get(name, "--" + name.replace("_", "-"))
        at = rf"(?<![^\s(]){re.escape(name)}"          # the name as a word: at the start, after a space or "("
        text = re.sub(at + r"=True\b", lambda m: flag, text)
        text = re.sub(at + "=", lambda m: flag + " ", text)
        text = re.sub(at + r"(?![\w=-])", lambda m: flag, text)
    return text
