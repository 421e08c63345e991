"""The one-vs-rest CORP diagram of a chosen class as a figure: P(y = c) against each calibrator's p_c over [0, 1],
the kernel curves overlaid with their PAV steps and bands (core.reports.corp_class), for ``calibview report
--corp-class``'s corp_class_<class>.png and the window's Class CORP tab."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Sequence

from calibview.core.reports.corp_class import class_diagrams
from calibview.core.reports.names import unique_names
from calibview.plot.spec import FigureOptions, PanelSpec, class_panels, with_corp

__all__ = ["class_figure_panels", "render_class_diagrams"]


def class_figure_panels(evaluation, forecasts, curves, *, bootstrap: bool = False,
                        layout: str = "overlay") -> list[PanelSpec]:
    """The panels of class ``forecasts.cls`` (core.reports.corp_class.ClassForecasts) of ``evaluation``: each
    calibrator's one-vs-rest kernel curve with its CORP steps (``curves``: calibrator name -> CorpCurve; empty:
    none) and their consistency band (``bootstrap``: the bootstrap band too)."""
    curves = dict(curves or {})
    diagrams = [dataclasses.replace(d, legend_text=_numbers(curves.get(d.name)))
                for d in class_diagrams(evaluation, forecasts)]
    title = (f"{evaluation.run.name} · {evaluation.request.eval_split}: class {forecasts.name} one-vs-rest "
             f"({int(forecasts.outcome.sum()):,} of {forecasts.outcome.size:,} samples)")
    panels = class_panels(diagrams, layout=layout, class_name=forecasts.name, title=title)
    return with_corp(panels, curves, bootstrap=bootstrap)


def _numbers(curve) -> str:
    """The legend's numbers of a calibrator: its one-vs-rest Brier score's MCB and DSC ×100, to three significant
    digits (a class's share of the Brier score is about 1/K of it: two decimals would read alike), or nothing."""
    if curve is None:
        return ""
    d = curve.decomposition
    return f"MCB×100 {100 * d['mcb']:.3g} · DSC×100 {100 * d['dsc']:.3g}"


def render_class_diagrams(parts: Sequence[tuple], out: Path, options: Optional[FigureOptions] = None,
                          formats: Sequence[str] = ("png",), *, bootstrap: bool = False) -> list[Path]:
    """One figure per (evaluation, ClassForecasts, CorpSet) of ``parts`` in folder ``out``: corp_class_<class>.png
    (corp_class_<run>_<split>_<class> when several runs or splits), overlaid, at ``options`` (default: 7 in at
    300 DPI) in each of ``formats``. Returns the paths written."""
    from calibview.plot.export import render_figure

    options = dataclasses.replace(options or FigureOptions(), layout="overlay")
    several = len({(ev.run.file, ev.run.name, ev.request.eval_split) for ev, _, _ in parts}) > 1
    keys = [([ev.run.name, ev.request.eval_split] if several else []) + [fc.name] for ev, fc, _ in parts]
    paths: list[Path] = []
    for (ev, fc, cs), name in zip(parts, unique_names(keys, "corp_class", ".png")):
        o = dataclasses.replace(options, extra={"bandwidth": f"{ev.request.bandwidth:g}",
                                                             "kernel": ev.request.kernel})
        panels = class_figure_panels(ev, fc, cs.curves, bootstrap=bootstrap)
        paths += render_figure(panels, Path(out) / name, o, bandwidth=ev.request.bandwidth,
                               kernel=ev.request.kernel, formats=list(formats))
    return paths
