"""report.html of ``calibview release``: one self-contained offline file rendered with jinja2 from
``calibview/templates/report.html`` (no network, no scripts; the diagram is a PNG data URI, the risk-coverage
curve inline SVG; print-friendly CSS)."""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Optional

import numpy as np

from calibview.core.reports import units
from calibview.core.stats.metrics import METRIC_HELP, METRIC_NAMES

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
#: points per risk-coverage polyline (the curve has one point per tie group: up to N)
CURVE_POINTS = 400
#: the plot area of the inline SVG figures, in SVG units
W, H, PAD = 520, 320, 44
COLOURS = ("#7f7f7f", "#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["iv"] = _interval
    env.filters["params"] = _params
    return env


def _params(params, limit: int = 400) -> str:
    """A calibrator's parameters as JSON, or their count when they are long (a K x K matrix)."""
    import json

    text = json.dumps(params, sort_keys=True)
    if len(text) <= limit:
        return text
    n = text.count(",") + 1
    return f"{n:,} numbers (keys {', '.join(sorted(params))}); see inference_config.json"


def _num(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return f"{int(x):,}"
    return f"{float(x):.{digits}f}"


def _pct(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{100 * float(x):.{digits}f}%"


def _interval(pair, digits: int = 4) -> str:
    lo, hi = pair
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def _x(v: float) -> float:
    return round(PAD + v * (W - 1.5 * PAD), 1)


def _y(v: float, top: float) -> float:
    return round(H - PAD - (v / top) * (H - 1.5 * PAD), 1)


def risk_coverage_svg(curves: dict) -> dict:
    """Coordinates of the risk-coverage figure: one polyline per calibrator, axes ticks, the y range."""
    top = max([float(np.max(c["risk"])) for c in curves.values() if len(c["risk"])] + [0.01])
    step = next(s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25) if top / s <= 6)
    top = math.ceil(top / step - 1e-9) * step
    lines = []
    for i, (name, c) in enumerate(curves.items()):
        cov, risk = np.asarray(c["coverage"]), np.asarray(c["risk"])
        keep = np.unique(np.linspace(0, len(cov) - 1, min(CURVE_POINTS, len(cov))).astype(int))
        pts = " ".join(f"{_x(cov[j])},{_y(risk[j], top)}" for j in keep)
        lines.append({"name": name, "points": pts, "colour": COLOURS[i % len(COLOURS)], "aurc": c["aurc"],
                      "dash": "7 5" if name == "none" else "",
                      "e_aurc": c["e_aurc"]})
    xticks = [{"pos": _x(v), "label": f"{v:.1f}"} for v in np.linspace(0, 1, 6)]
    yticks = [{"pos": _y(v, top), "label": f"{v:.2f}"} for v in np.arange(0, top + step / 2, step)]
    return {"lines": lines, "xticks": xticks, "yticks": yticks, "w": W, "h": H, "pad": PAD, "x0": _x(0),
            "x1": _x(1), "y0": _y(0, top), "y1": _y(top, top)}


def reliability_svg(results) -> dict:
    """A reliability diagram from the equal-width bin tables (used when no PNG diagram could be drawn)."""
    lines = []
    for i, r in enumerate(results):
        t = r.bins
        ok = np.asarray(t.count) > 0
        conf, acc = np.asarray(t.confidence)[ok], np.asarray(t.accuracy)[ok]
        pts = " ".join(f"{_x(c)},{_y(a, 1.0)}" for c, a in zip(conf, acc))
        lines.append({"name": r.name, "points": pts, "colour": COLOURS[(i + 1) % len(COLOURS)]})
    xticks = [{"pos": _x(v), "label": f"{v:.1f}"} for v in np.linspace(0, 1, 6)]
    yticks = [{"pos": _y(v, 1.0), "label": f"{v:.1f}"} for v in np.linspace(0, 1, 6)]
    return {"lines": lines, "xticks": xticks, "yticks": yticks, "w": W, "h": H, "pad": PAD, "x0": _x(0),
            "x1": _x(1), "y0": _y(0, 1.0), "y1": _y(1.0, 1.0)}


def _overall(rows) -> str:
    """The banner's state: ``"fail"`` when a criterion fails, else ``"inconclusive"`` when one is (its interval
    straddles the limit), else ``"pass"``."""
    outcomes = {c.outcome for c in rows}
    return "fail" if "fail" in outcomes else "inconclusive" if "inconclusive" in outcomes else "pass"


def render(release, diagram_png: Optional[bytes] = None) -> str:
    """The HTML text of the release report."""
    ev, cfg = release.evaluation, release.config
    results = list(ev.results)
    # the metrics table reads like the window's (calibview.core.reports.units): unit in the header, fixed precision
    metrics = [{"name": m, "header": units.header(m), "help": METRIC_HELP.get(m, ""),
                "cells": [(units.fmt(m, r.metrics[m].value, ev.request.n_boot), units.fmt_interval(m, r.metrics[m].lo, r.metrics[m].hi))
                          for r in results]}
               for m in METRIC_NAMES]
    per_class = sorted(release.per_class, key=lambda r: (r["below_min_slice"], -(r["ece"] if math.isfinite(r["ece"])
                                                                                 else -1.0)))
    t = cfg["thresholds"]
    per = t.get("per_class") or []
    context = {
        "cfg": cfg, "run": f"{cfg['model']}/{cfg['dataset']}", "ev": ev, "results": results, "metrics": metrics,
        "shipped": release.name, "verdict": release.verdict, "checklist": release.checklist,
        "passed": all(c.passed for c in release.checklist), "per_class": per_class,
        "overall": _overall(release.checklist), "rule": getattr(release, "decide_on", "point"),
        "unsure": [c for c in release.checklist if c.outcome == "inconclusive"],
        "audit": release.audit, "slices": release.slices if release.slice_column != "class" else [],
        "slice_column": release.slice_column,
        "rc": risk_coverage_svg(release.risk_coverage),
        "reliability": None if diagram_png else reliability_svg(results),
        "diagram": ("data:image/png;base64," + base64.b64encode(diagram_png).decode("ascii")) if diagram_png
        else None,
        "n_thresholds": sum(v is not None for v in per), "n_unreached": sum(v is None for v in per),
        "has_per_class": bool(per), "labels": {r.name: r.label for r in results},
        "notes": [w for r in results for w in r.warnings],
    }
    return _environment().get_template("report.html").render(**context)
