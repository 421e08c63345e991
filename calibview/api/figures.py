"""The figures and the report folder of a :class:`~calibview.api.result.Result`, drawn by the code that
``calibview report`` uses: the calibration-sharpness diagram (:func:`calibview.plot.canvas.render_diagram_png`,
diagram.png), the publication figure (:func:`calibview.plot.export.render_figure`: PNG, SVG or PDF at a physical
size) and the report folder (:class:`calibview.core.reports.folder.ReportFolder` and its writers).

Everything is drawn offscreen (:func:`calibview.plot.render_png.ensure_app` picks Qt's offscreen platform when
there is no display): no window opens. Qt and pyqtgraph are imported only when something is drawn.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.evaluation.results import Evaluation

__all__ = ["Figure", "write_report_folder", "diagram_title"]

#: the notebook figure: the report's diagram layout (900 x 700 logical pixels) drawn at this scale
NOTEBOOK_SIZE, NOTEBOOK_SCALE = (900, 700), 1.0


def diagram_title(ev: Evaluation) -> str:
    """The diagram's title, as ``calibview report`` writes it: "model/data · test (N = 10,000, K = 10)"."""
    return f"{ev.run.name} · {ev.request.eval_split} (N = {ev.n_eval:,}, K = {ev.k})"


def _plot():
    """The figure code, or a one-sentence ImportError when Qt or pyqtgraph is not installed."""
    try:
        from calibview.plot import canvas, export, figure, spec
    except ImportError as e:
        raise ImportError(f"Drawing the diagram needs PySide6 and pyqtgraph ({e}); install them with "
                          f"pip install PySide6 pyqtgraph.") from None
    return canvas, export, figure, spec


class Figure:
    """The calibration-sharpness diagram of one evaluation (every calibrator of its first setting).

    In Jupyter it displays inline (:meth:`_repr_png_`: the PNG of ``calibview report``'s diagram.png, at
    900 x 700 pixels). ``paths``: the files :meth:`save` (or ``Result.diagram(path)``) wrote."""

    def __init__(self, evaluation: Evaluation) -> None:
        self.evaluation = evaluation
        self.paths: list[Path] = []
        self._png: Optional[bytes] = None

    def __repr__(self) -> str:
        names = ", ".join(r.name for r in self.evaluation.results)
        return f"<calibview Figure: {diagram_title(self.evaluation)}; {names}>"

    def png(self, size: tuple[int, int] = NOTEBOOK_SIZE, scale: float = NOTEBOOK_SCALE) -> bytes:
        """The diagram as PNG bytes, ``scale * size`` pixels, drawn offscreen by the report's figure code."""
        canvas = _plot()[0]
        ev = self.evaluation
        with tempfile.TemporaryDirectory(prefix="calibview-figure-") as tmp:
            path = Path(tmp) / "diagram.png"
            canvas.render_diagram_png(list(ev.results), path, bandwidth=ev.request.bandwidth,
                                      kernel=ev.request.kernel, size=size, scale=scale, title=diagram_title(ev))
            return path.read_bytes()

    def _repr_png_(self) -> bytes:
        if self._png is None:
            self._png = self.png()
        return self._png

    def save(self, path, *, layout: str = "overlay", width="7in", dpi: float = 300.0, font_size: float = 8.0,
             line_width: float = 1.2, formats: Sequence[str] = ()) -> list[Path]:
        """Write the publication figure to ``path`` (its suffix is the format: png, svg or pdf; or one file per
        entry of ``formats``): ``layout`` "overlay" or "grid" (one panel per calibrator), ``width`` a length
        ("7in", "3.5in", "18cm", "2100px"), ``dpi`` the PNG resolution (10 to 2400), fonts and lines in points.
        As ``calibview report --layout ... --figure-width ... --dpi ...`` writes it. Returns the paths."""
        _, export, figure, spec = _plot()
        if layout not in ("overlay", "grid"):
            raise ParameterError(f"layout must be 'overlay' or 'grid', not {layout!r}.", "layout")
        if not 10 <= float(dpi) <= 2400:
            raise ParameterError(f"dpi={float(dpi):g} is out of range; choose between 10 and 2400.", "dpi")
        path = Path(os.fspath(path))
        try:
            width_in = spec.parse_length(width, float(dpi))
            fmts = spec.parse_formats(",".join(formats) if formats else (path.suffix.lstrip(".") or "png"))
        except ValueError as e:
            raise CalibviewError(f"{e}.") from None
        ev = self.evaluation
        opts = spec.FigureOptions(width_in=width_in, dpi=float(dpi), layout=layout, font_pt=float(font_size),
                                  line_width_pt=float(line_width), title=diagram_title(ev),
                                  extra={"bandwidth": f"{ev.request.bandwidth:g}", "kernel": ev.request.kernel})
        panels = spec.calibrator_panels(ev.results, k=ev.k, layout=layout,
                                        subtitle_of=lambda r: figure.legend_numbers(r.metrics, loss=r.loss))
        if path.parent and not path.parent.exists():
            raise CalibviewError(f"{path.parent} does not exist; create the folder first.")
        written = export.render_figure(panels, path, opts, bandwidth=ev.request.bandwidth,
                                       kernel=ev.request.kernel, formats=fmts if formats else ())
        self.paths += written
        return written


def write_report_folder(evaluations: Sequence[Evaluation], engine, out, *, settings: dict, force: bool = False,
                        diagram: bool = True, audit=None, target_precision: Optional[float] = None) -> list[Path]:
    """The folder ``calibview report --out`` writes for these evaluations (one run, the settings of an
    ablation): metrics.csv, curves.csv, calibrators.json, ranking.csv, selective.csv, audit.csv (thresholds.csv
    with ``target_precision``), diagram.png and mcb_dsc.png (unless ``diagram`` is False; skipped with a warning
    without Qt) and manifest.json, staged and moved into ``out`` when complete. ``audit``: the thresholds of
    audit.csv (a sequence or "0.9,0.95"; default 0.9, 0.95, 0.99). Returns the paths written."""
    from calibview.core.reports.folder import ReportFolder
    from calibview.core.reports.selective import DEFAULT_AUDIT, check_target, parse_thresholds, write_selective
    from calibview.core.reports.corp import corp_sets
    from calibview.core.reports.tables import write_report

    log = logging.getLogger("calibview")
    if audit is None:
        audit = DEFAULT_AUDIT
    elif isinstance(audit, (int, float)):
        audit = [audit]
    thresholds = parse_thresholds(audit if isinstance(audit, str) else ",".join(f"{float(t)!r}" for t in audit))
    check_target(target_precision)
    folder = ReportFolder(out, inputs=[], settings=settings, force=force)     # refused before any work
    first = evaluations[0]
    corp = corp_sets(engine, evaluations)     # curves.csv's CORP columns and mcb_dsc.png
    with folder:
        _, messages = write_report(evaluations, folder.dir, corp=corp)
        _, notes = write_selective(engine, evaluations, folder.dir, thresholds, target_precision)
        if diagram:
            try:
                canvas = _plot()[0]
            except ImportError as e:
                log.warning(f"warning: no diagram.png ({e})")
            else:
                canvas.render_diagram_png(list(first.results), folder.dir / "diagram.png",
                                          bandwidth=first.request.bandwidth, kernel=first.request.kernel,
                                          title=diagram_title(first))
                from calibview.core.reports.corp import mcb_dsc_points
                from calibview.plot.corp.mcb_dsc import render_mcb_dsc

                render_mcb_dsc(mcb_dsc_points([first], corp), folder.dir / "mcb_dsc.png")
    for note in notes:
        log.warning(note)
    for message in messages + folder.notes:
        log.warning(f"note: {message}")
    return list(folder.written)

