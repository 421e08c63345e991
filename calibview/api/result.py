"""What :func:`calibview.evaluate` returns: :class:`Result` (the records, a DataFrame, each calibrator's estimates,
the fitted calibrators, the diagram, the report folder, an HTML table in a notebook) and :class:`Estimates` (one
calibrator's metrics as attributes, ``res["ts"].ece``).

The numbers are the engine's (:class:`~calibview.core.evaluation.results.Evaluation`), unchanged: ``rows`` are the
records of ``calibview metrics --json``, and the HTML table shows them in the display convention of
:mod:`calibview.core.reports.units` (ECE in percent, squared-error scores ×100, intervals at the estimate's
precision).
"""

from __future__ import annotations

import html
import json
import math
from typing import Optional, Sequence

from calibview.api.figures import Figure, write_report_folder
from calibview.core.evaluation.records import metrics_rows
from calibview.core.evaluation.results import CalibratorResult, Evaluation
from calibview.core.reports import units
from calibview.core.reports.tables import metrics_json
from calibview.core.stats.metrics import METRIC_NAMES

__all__ = ["Result", "Estimates", "HTML_METRICS"]

#: the columns of the notebook table (every metric is in ``rows`` and ``to_pandas()``)
HTML_METRICS = ("accuracy", "nll", "brier", "ece", "ace", "classwise_ece", "smece", "cal", "tot", "sharpness_gap",
                "aurc", "auroc")


class Estimates:
    """One calibrator's metrics at one setting: ``.ece`` (any name of ``METRIC_NAMES``) is the point estimate
    (a float, a plain fraction: 0.0788 for 7.88 %), :meth:`interval` its bootstrap interval; ``result`` is the
    engine's CalibratorResult (curves, bins, per-class arrays, warnings) and ``fitted`` the fitted calibrator."""

    def __init__(self, result: CalibratorResult) -> None:
        self.result = result

    @property
    def name(self) -> str:
        """The calibrator's name ("ts")."""
        return self.result.name

    @property
    def fitted(self):
        """The fitted calibrator (:class:`calibview.core.calibrators.Fitted`)."""
        return self.result.fitted

    def __getattr__(self, metric: str) -> float:
        if metric.startswith("_") or metric not in METRIC_NAMES:
            raise AttributeError(f"{metric!r} is not a metric; the metrics are {', '.join(METRIC_NAMES)}.")
        return float(self.result.metrics[metric].value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(METRIC_NAMES))

    def interval(self, metric: str) -> tuple[float, float]:
        """(lo, hi) of ``metric``'s bootstrap interval at the request's level (NaN, NaN without resamples)."""
        if metric not in METRIC_NAMES:
            raise KeyError(f"{metric!r} is not a metric; the metrics are {', '.join(METRIC_NAMES)}.")
        est = self.result.metrics[metric]
        return float(est.lo), float(est.hi)

    def __repr__(self) -> str:
        parts = [units.caption(m, self.result.metrics[m].value) for m in ("accuracy", "ece", "nll", "brier")]
        return f"<{self.result.label}: " + ", ".join(parts) + ">"


class Result:
    """The evaluation of arrays by :func:`calibview.evaluate`: one :class:`Evaluation` per setting (one, or the
    grid of an ablation), sharing the fitted calibrators.

    - ``rows``: list of dicts, exactly the records of ``calibview metrics --json`` (non-finite numbers are None
      and named in ``nonfinite``);
    - ``res["ts"]``: the :class:`Estimates` of the first setting (``res["ts"].ece``,
      ``res["ts"].interval("ece")``); ``evaluations`` holds every setting's;
    - ``calibrators``: name -> fitted calibrator (:class:`calibview.api.calibrators.Calibrator`);
    - :meth:`to_pandas`, :meth:`diagram`, :meth:`report`; in Jupyter the metrics table displays inline."""

    def __init__(self, evaluations: Sequence[Evaluation], *, engine=None, run=None, settings=(),
                 members: Sequence[Evaluation] = ()) -> None:
        self.evaluations = list(evaluations)
        self.engine = engine            # its cache holds the fits and scores the report and figures reuse
        self.run = run                  # keeps the in-memory arrays alive for the engine (core.io.arrays)
        self.settings = list(settings)
        #: with ``members=``: the evaluations of each member (their rows follow the ensemble's in ``rows``)
        self.members = list(members)
        self.rows: list[dict] = json.loads(metrics_json(metrics_rows(self.evaluations + self.members)))
        first = self.evaluations[0]
        from calibview.api.calibrators import from_fitted

        # scikit-learn-style (predict_proba, temperature_, to_json); .fitted of each is the core's object
        self.calibrators = {r.name: from_fitted(r.fitted) for r in first.results}

    @property
    def uncertainty(self):
        """With ``members=``: the per-sample split of the ensemble's entropy on the test arrays
        (:class:`calibview.core.io.members.read.Decomposition`: ``total``, ``aleatoric``, ``epistemic`` (N,)
        float64 nats); None otherwise."""
        from calibview.core.evaluation.members.uncertainty import of_evaluation

        return of_evaluation(self.evaluation)

    @property
    def evaluation(self):
        """The first setting's Evaluation (the one ``res[name]``, the diagram and the report's diagram show)."""
        return self.evaluations[0]

    def __getitem__(self, name: str) -> Estimates:
        for r in self.evaluation.results:
            if r.name == name:
                return Estimates(r)
        raise KeyError(f"No calibrator {name!r} was evaluated; these were: "
                       f"{', '.join(r.name for r in self.evaluation.results)}.")

    def __iter__(self):
        return iter(r.name for r in self.evaluation.results)

    def __len__(self) -> int:
        return len(self.evaluation.results)

    def to_pandas(self):
        """``rows`` as a pandas DataFrame (one row per calibrator and setting, the columns of metrics.csv);
        None in ``rows`` becomes NaN."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Result.to_pandas() needs pandas, which is not installed; install it with "
                              "pip install pandas, or use Result.rows (a list of dicts).") from None
        return pd.DataFrame([{k: v for k, v in row.items() if k != "nonfinite"} for row in self.rows])

    def diagram(self, path=None, *, layout: str = "overlay", width="7in", dpi: float = 300.0,
                font_size: float = 8.0, line_width: float = 1.2, formats: Sequence[str] = ()) -> Figure:
        """The calibration-sharpness diagram of the first setting, as a :class:`Figure` that displays inline in
        Jupyter. With ``path`` ("fig.pdf", ".png" or ".svg") the publication figure is also written there
        (``layout`` "overlay" or "grid", ``width`` "7in" / "18cm" / "2100px", ``dpi``, fonts and lines in
        points), as ``calibview report --layout ... --figure-width ... --dpi ...`` writes it."""
        fig = Figure(self.evaluation)
        if path is not None:
            fig.save(path, layout=layout, width=width, dpi=dpi, font_size=font_size, line_width=line_width,
                     formats=formats)
        return fig

    def report(self, out, *, force: bool = False, diagram: bool = True, audit=None,
               target_precision: Optional[float] = None) -> list:
        """Write the folder ``calibview report --out`` writes (metrics.csv, curves.csv, calibrators.json,
        ranking.csv, selective.csv, audit.csv, diagram.png, manifest.json) into ``out``; a non-empty folder that
        holds no earlier report is refused unless ``force``. Returns the paths written."""
        req = self.evaluation.request
        settings = {"source": "arrays (calibview.evaluate)", "run": self.evaluation.run.name,
                    "fit_split": req.fit_split, "eval_split": req.eval_split,
                    "calibrators": ",".join(req.calibrators),
                    "bins": [s.bins for s in self.settings] or [req.bins], "n_boot": req.n_boot, "seed": req.seed,
                    "level": req.level, "bandwidth": [s.bandwidth for s in self.settings] or [req.bandwidth],
                    "kernel": [s.kernel for s in self.settings] or [req.kernel], "device": req.device,
                    "options": [[n, list(map(list, o))] for n, o in req.options]}
        return write_report_folder(self.evaluations, self.engine, out, settings=settings, force=force,
                                   diagram=diagram, audit=audit, target_precision=target_precision)

    # --- display -------------------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        ev = self.evaluation
        names = ", ".join(r.name for r in ev.results)
        more = f", {len(self.evaluations)} settings" if len(self.evaluations) > 1 else ""
        return (f"<calibview Result: {ev.run.name}, test N = {ev.n_eval:,}, K = {ev.k}, fit N = {ev.n_fit:,}; "
                f"{names}{more}>")

    def _repr_html_(self) -> str:
        """The metrics table (one row per calibrator and setting) in the units of core.reports.units, each
        estimate with its interval: "7.88 [7.48, 8.55]"."""
        ev = self.evaluation
        ablation = len(self.evaluations) > 1
        head = ["calibrator"] + (["bins", "bandwidth", "kernel"] if ablation else []) + \
            [units.header(m) for m in HTML_METRICS]
        out = ['<div class="calibview-result">',
               f"<p><b>{html.escape(ev.run.name)}</b> · test N = {ev.n_eval:,}, K = {ev.k}"
               + (f", fit N = {ev.n_fit:,}" if ev.request.fit_split else "")
               + (f" · intervals: {ev.request.level:.0%} bootstrap, {ev.request.n_boot} resamples"
                  if ev.request.n_boot else " · no intervals (n_boot = 0)") + "</p>",
               "<table>", "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead>",
               "<tbody>"]
        for row in self.rows:
            cells = [html.escape(row["calibrator"])]
            if ablation:
                cells += [str(row["bins"]), f"{row['bandwidth']:g}", html.escape(row["kernel"])]
            for m in HTML_METRICS:
                cells.append(html.escape(units.fmt_estimate(m, _value(row, m), _value(row, f"{m}_lo"),
                                                            _value(row, f"{m}_hi"), ev.request.n_boot)))
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        out += ["</tbody>", "</table>",
                "<p><small>% : × 100 as a percentage; ×100 : squared-error scores × 100 (not a percentage); "
                "NLL in nats; AUROC 0 to 1. res.rows holds plain fractions at full precision.</small></p>",
                "</div>"]
        return "\n".join(out)


def _value(row: dict, key: str) -> Optional[float]:
    """A record's number with its non-finite value restored (JSON null -> inf / -inf / NaN)."""
    v = row.get(key)
    if v is None:
        return {"inf": math.inf, "-inf": -math.inf}.get(row.get("nonfinite", {}).get(key), math.nan)
    return float(v)
