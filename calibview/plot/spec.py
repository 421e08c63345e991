"""What a figure shows, independent of how it is drawn: panels of curve items, and the export options.

One layout rule serves every comparison (calibrators, runs, eval splits, slices): **the grid's panels split by
one factor, the overlay inside a panel by another**. Colour follows an item's ``color_key`` and line style its
``dash_key``, so two factors can be read in one panel (e.g. calibrators by colour, compared runs by dash).

Building a figure for a comparison (this is the API ``figure.FigureView`` draws and other views call)::

    from calibview.plot.spec import CurveItem, PanelSpec, FigureOptions, split_panels
    items = [CurveItem(result=r, label=f"{run} {r.label}", color_key=r.name, dash_key=run, k=ev.k)
             for run, ev in evaluations.items() for r in ev.results]
    panels = split_panels(items, panel_of=lambda it: it.color_key, layout="grid")   # one panel per calibrator
    # or panel_of=lambda it: it.dash_key: one panel per run, the calibrators overlaid inside it
    from calibview.plot.export import render_figure
    render_figure(panels, "out.pdf", FigureOptions(width_in=7, dpi=300), bandwidth=0.05)

``result`` is anything with the attributes of core.evaluation's ``CalibratorResult`` that are drawn: ``name``,
``label``, ``metrics`` (name -> Estimate with ``.value``), ``stats`` (core.stats' ``BinnedStats``) and, for the
optional reliability bars, ``bins``, ``bin_acc_lo``, ``bin_acc_hi``.

Pure Python (no Qt), so CLI code can build specs before deciding whether to draw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Optional, Sequence

__all__ = ["CurveItem", "PanelSpec", "FigureOptions", "LAYOUTS", "split_panels", "calibrator_panels",
           "with_terciles", "with_corp", "positive_class_panels", "class_panels", "parse_length", "parse_formats"]

LAYOUTS = ("overlay", "grid")
FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class CurveItem:
    """One curve (with its band and density) in a panel.

    color_key: items with equal keys share a colour in every panel; items with different keys never do (within
        the palette's size). Usually the calibrator's name.
    dash_key: the second factor (e.g. the run); "" or the first key seen is solid, later keys dashed, dotted, ...
    k: number of classes of the run: curve, band and density are drawn on [1/k, 1] only (0: on [0, 1]).
    faint: a reference drawn thin and grey without band or legend numbers (the uncalibrated curve in a grid).
    band: draw the sharpness band (the global band switch still applies).
    density: draw its density in the strip below.
    corp: its CORP curve (core.stats.corp.curves.CorpCurve: PAV steps with their bands), drawn over it; None:
        none (``with_corp``).
    """

    result: Any
    label: str
    color_key: str
    dash_key: str = ""
    k: int = 0
    faint: bool = False
    band: bool = True
    density: bool = True
    corp: Any = None


@dataclass(frozen=True)
class PanelSpec:
    """One plot: a title (a caption line of numbers may follow after a newline) and the items overlaid in it."""

    title: str
    items: tuple = ()
    subtitle: str = ""
    x_label: str = "confidence"
    y_label: str = "accuracy"

    @property
    def k(self) -> int:
        """The largest number of classes among the items (0: unknown)."""
        return max((it.k for it in self.items), default=0)


def split_panels(items: Sequence[CurveItem], *, panel_of: Callable[[CurveItem], str], layout: str = "grid",
                 title_of: Optional[Callable[[str, list], str]] = None,
                 subtitle_of: Optional[Callable[[str, list], str]] = None,
                 reference: Optional[Callable[[CurveItem], bool]] = None) -> list[PanelSpec]:
    """The layout rule. ``overlay``: one panel holding every item. ``grid``: one panel per distinct
    ``panel_of(item)`` (in order of first appearance), holding the items of that value; items for which
    ``reference(item)`` is true are not given a panel of their own but drawn faint in every panel instead.
    ``title_of(key, items)`` / ``subtitle_of(key, items)`` name the panels (default: the key, nothing)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    items = list(items)
    if layout == "overlay":
        return [PanelSpec(title="", items=tuple(items))]
    refs = [it for it in items if reference is not None and reference(it)]
    groups: dict[str, list] = {}
    for it in items:
        if it not in refs:
            groups.setdefault(panel_of(it), []).append(it)
    if not groups and refs:                      # only references: they get their panel
        groups = {panel_of(it): [it] for it in refs}
        refs = []
    faint = [replace(r, faint=True, band=False) for r in refs]
    return [PanelSpec(title=title_of(key, its) if title_of else key, items=tuple(faint + its),
                      subtitle=subtitle_of(key, its) if subtitle_of else "")
            for key, its in groups.items()]


def calibrator_panels(results: Iterable, *, k: int = 0, layout: str = "grid", dash_key: str = "",
                      subtitle_of: Optional[Callable[[Any], str]] = None) -> list[PanelSpec]:
    """The calibrators of one run: overlaid, or one panel per calibrator with the uncalibrated ("none") curve
    faint in each, each titled with its label and ``subtitle_of(result)`` (e.g. ECE, CAL and Brier)."""
    items = [CurveItem(result=r, label=r.label, color_key=r.name, dash_key=dash_key, k=k) for r in results]
    sub = (lambda key, its: subtitle_of(its[0].result)) if subtitle_of else None
    return split_panels(items, panel_of=lambda it: it.color_key, layout=layout,
                        title_of=lambda key, its: its[0].label, subtitle_of=sub,
                        reference=lambda it: it.color_key == "none" and len(items) > 1)


def with_terciles(panels: Sequence[PanelSpec], calibrator: Optional[str], curves: Sequence, *, k: int = 0
                  ) -> list[PanelSpec]:
    """``panels`` with the epistemic tercile curves of ``calibrator`` (core.evaluation.members.terciles'
    TercileCurve, low / mid / high) added after the calibrators' items of the panel that holds ``calibrator``
    (the first panel where it is only the faint reference, the uncalibrated curve of a grid, when it has none of
    its own): in the overlay's one panel, in that calibrator's panel of a grid. Without band or
    density; each has its own colour key (its name, "MI low") and dash key, so that after the calibrators' solid
    lines the three are dashed, dotted and dash-dotted (palette.assign_dashes' order)."""
    extra = tuple(CurveItem(result=c, label=c.label, color_key=c.name, dash_key=c.name, k=k, band=False,
                            density=False) for c in curves)
    if not extra:
        return list(panels)
    holds = [i for i, p in enumerate(panels) if any(it.color_key == calibrator for it in p.items)]
    own = [i for i in holds if any(it.color_key == calibrator and not it.faint for it in panels[i].items)]
    at = (own or holds or [None])[0]
    return [replace(p, items=tuple(p.items) + extra) if i == at else p for i, p in enumerate(panels)]


def with_corp(panels: Sequence[PanelSpec], curves, *, bootstrap: bool = False) -> list[PanelSpec]:
    """``panels`` with the CORP curve of each calibrator (``curves``: calibrator name -> CorpCurve, e.g. a
    core.reports.corp.CorpSet's ``curves``; empty: unchanged) on its own items, not on the faint references;
    without ``bootstrap`` the curves' bootstrap bands are left out."""
    if not curves:
        return list(panels)

    def of(it):
        c = curves.get(it.color_key) if not it.faint and getattr(it.result, "name", None) == it.color_key else None
        return c if c is None or bootstrap else c.without_bootstrap()

    return [replace(p, items=tuple(replace(it, corp=of(it)) for it in p.items)) for p in panels]


def positive_class_panels(results: Iterable, sample_stats, *, layout: str = "grid") -> list[PanelSpec]:
    """A binary run's positive-class diagram (core.stats.positive_class): P(y = 1) against the predicted probability
    of class 1 over [0, 1], one panel per calibrator (the uncalibrated one faint in each) or overlaid.
    ``sample_stats``: calibrator name -> per-sample vectors (``Engine.scored(req)[name].stats``)."""
    from calibview.core.stats.positive_class import positive_class
    diagrams = [positive_class(r.name, r.label, sample_stats[r.name], r.metrics) for r in results
                if r.name in sample_stats]
    return class_panels(diagrams, layout=layout, title="Positive class", class_name="1")


def class_panels(diagrams: Sequence, *, layout: str = "grid", title: str = "",
                 class_name: str = "c") -> list[PanelSpec]:
    """The one-vs-rest diagram of a class: P(y = c) against the predicted probability p_c over [0, 1], one panel
    per calibrator (the uncalibrated one faint in each) or overlaid (titled ``title``). ``diagrams``: drawable
    results (core.stats.positive_class.PositiveClass: name, label, stats, metrics), one per calibrator."""
    items = [CurveItem(result=d, label=d.label, color_key=d.name, k=0) for d in diagrams]
    panels = split_panels(items, panel_of=lambda it: it.color_key, layout=layout,
                          title_of=lambda key, its: its[0].label,
                          reference=lambda it: it.color_key == "none" and len(items) > 1)
    if layout == "overlay" and panels and title:
        panels[0] = replace(panels[0], title=title)
    return [replace(p, x_label=f"predicted P(y = {class_name})", y_label=f"P(y = {class_name}) (kernel estimate)")
            for p in panels]


_UNITS_IN = {"in": 1.0, "inch": 1.0, "cm": 1 / 2.54, "mm": 1 / 25.4, "pt": 1 / 72}


def parse_length(text, dpi: float = 300.0) -> float:
    """A figure width in inches from "7in", "3.5", "18cm", "89mm", "504pt" or "2100px" (pixels at ``dpi``)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", str(text).lower())
    if not m:
        raise ValueError(f"not a length: {text!r} (examples: 7in, 3.5in, 18cm, 2100px)")
    value, unit = float(m.group(1)), m.group(2) or "in"
    if unit == "px":
        inches = value / float(dpi)
    elif unit in _UNITS_IN:
        inches = value * _UNITS_IN[unit]
    else:
        raise ValueError(f"unknown unit {unit!r} in {text!r}: use in, cm, mm, pt or px")
    if not 0.5 <= inches <= 40:
        raise ValueError(f"figure width {text!r} is {inches:.2f} in; choose between 0.5 and 40 in")
    return inches


def parse_formats(text: str) -> list[str]:
    """The figure formats of "png,svg" (lower case, without dots or repeats, in the order given)."""
    out = [f.strip().lower().lstrip(".") for f in str(text).split(",") if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise ValueError(f"unknown figure format {', '.join(bad) or text!r}: choose from {', '.join(FORMATS)}")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class FigureOptions:
    """How a figure is exported. Sizes are physical: ``width_in`` at ``dpi`` gives the PNG's pixels (7 in at
    300 DPI: 2100 px); fonts in points and lines in points keep their size whatever the DPI.
    ``height_in`` None: chosen from the layout (the panels' aspect). ``bands``: the sharpness bands;
    ``ci_band``: the curves' pointwise confidence bands (where computed at the figure's bandwidth)."""

    width_in: float = 7.0
    dpi: float = 300.0
    height_in: Optional[float] = None
    font_pt: float = 8.0
    line_width_pt: float = 1.2
    theme: str = "light"
    layout: str = "grid"
    bands: bool = True
    ci_band: bool = False
    title: str = ""
    extra: dict = field(default_factory=dict)

    def pixels(self, height_in: float) -> tuple[int, int]:
        """(width, height) in pixels of a PNG ``height_in`` inches high at the options' width and DPI."""
        return round(self.width_in * self.dpi), round(height_in * self.dpi)

    def describe(self) -> str:
        """The settings as one line, written into the file's metadata (PNG text chunk, SVG/PDF title)."""
        parts = [f"width={self.width_in:g}in", f"dpi={self.dpi:g}", f"font={self.font_pt:g}pt",
                 f"line={self.line_width_pt:g}pt", f"theme={self.theme}", f"layout={self.layout}",
                 f"bands={'on' if self.bands else 'off'}"] + (["confidence_band=on"] if self.ci_band else [])
        parts += [f"{k}={v}" for k, v in self.extra.items()]
        head = f"{self.title} | " if self.title else ""
        return head + "calibview figure: " + " ".join(parts)
