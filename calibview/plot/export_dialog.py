"""Export dialog: the diagram as a publication figure (PNG at a size and DPI, SVG, vector PDF), with font size,
line width, export theme (light by default, whatever the screen's) and layout. Writes through
``CalibrationCanvas.export_figure`` (export.py), which records the settings in the file's metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtWidgets

from calibview.plot.spec import FigureOptions

__all__ = ["ExportDialog", "PRESETS"]

#: (label, width in inches): journal column widths, at 300 DPI.
PRESETS = (("Single column 3.5 in", 3.5), ("Double column 7 in", 7.0))
_FORMATS = (("PNG image", "png"), ("PDF (vector, fonts embedded)", "pdf"), ("SVG (vector)", "svg"))
_UNITS = (("in", 1.0), ("cm", 1 / 2.54), ("px", None))


class ExportDialog(QtWidgets.QDialog):
    """A dialog that shows the export settings (format, width, DPI, font, line width, theme, layout, bands) and
    writes the figure through ``canvas.export_figure``. ``canvas`` is anything with ``export_figure`` and,
    optionally, ``layout_mode``, ``bands_on`` and ``title`` (the canvas, or the window's figure of compared runs)."""

    def __init__(self, canvas, parent: Optional[QtWidgets.QWidget] = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export figure")
        self.canvas = canvas
        form = QtWidgets.QFormLayout()
        self.format = QtWidgets.QComboBox()
        for label, key in _FORMATS:
            self.format.addItem(label, key)
        form.addRow("Format", self.format)

        self.width = QtWidgets.QDoubleSpinBox()
        self.width.setDecimals(2)
        self.width.setRange(0.5, 10000)
        self.width.setValue(7.0)
        self.unit = QtWidgets.QComboBox()
        for label, _ in _UNITS:
            self.unit.addItem(label)
        self._unit_index = 0
        self.unit.currentIndexChanged.connect(self._unit_changed)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.width, 1)
        row.addWidget(self.unit)
        for label, inches in PRESETS:
            b = QtWidgets.QPushButton(label)
            b.clicked.connect(lambda _=False, w=inches: self.set_preset(w))
            row.addWidget(b)
        form.addRow("Width", row)
        self.dpi = QtWidgets.QSpinBox()
        self.dpi.setRange(30, 2400)
        self.dpi.setValue(300)
        self.dpi.setSuffix(" DPI")
        form.addRow("Resolution (PNG)", self.dpi)
        self.font = QtWidgets.QDoubleSpinBox()
        self.font.setRange(4, 24)
        self.font.setValue(8)
        self.font.setSuffix(" pt")
        form.addRow("Font size", self.font)
        self.line = QtWidgets.QDoubleSpinBox()
        self.line.setRange(0.25, 6)
        self.line.setSingleStep(0.25)
        self.line.setValue(1.2)
        self.line.setSuffix(" pt")
        form.addRow("Line width", self.line)
        self.theme = QtWidgets.QComboBox()
        self.theme.addItem("Light (for print)", "light")
        self.theme.addItem("Dark", "dark")
        form.addRow("Theme", self.theme)
        self.layout_box = QtWidgets.QComboBox()
        self.layout_box.addItem("Overlay", "overlay")
        self.layout_box.addItem(getattr(canvas, "grid_label", "Grid (one panel per calibrator)"), "grid")
        self.layout_box.setCurrentIndex(self.layout_box.findData(getattr(canvas, "layout_mode", "overlay")))
        form.addRow("Layout", self.layout_box)
        self.bands = QtWidgets.QCheckBox(getattr(canvas, "band_label", "Sharpness bands"))
        self.bands.setChecked(bool(getattr(canvas, "bands_on", True)))
        form.addRow("", self.bands)
        self.ci_band = QtWidgets.QCheckBox("Confidence bands of the curves")
        self.ci_band.setChecked(bool(getattr(canvas, "ci_on", False)))
        form.addRow("", self.ci_band)
        # what does not apply to this figure (the regression diagram: no curve band), greyed with why
        for key, box in (("layout", self.layout_box), ("ci_band", self.ci_band)):
            why = getattr(canvas, "disabled_options", {}).get(key)
            if why:
                box.setEnabled(False)
                box.setToolTip(why)
        self.size_note = QtWidgets.QLabel()
        form.addRow("", self.size_note)
        for w in (self.width, self.dpi):
            w.valueChanged.connect(self._update_note)
        self.layout_box.currentIndexChanged.connect(self._update_note)
        self.format.currentIndexChanged.connect(self._update_note)

        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Save
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(buttons)
        self._update_note()

    # ------------------------------------------------------------------------------------------------ values
    def width_in(self) -> float:
        """The width entered, in inches (pixels are converted at the DPI entered)."""
        factor = _UNITS[self.unit.currentIndex()][1]
        return self.width.value() / self.dpi.value() if factor is None else self.width.value() * factor

    def set_preset(self, inches: float) -> None:
        """A journal column: ``inches`` wide at 300 DPI."""
        self.unit.setCurrentIndex(0)
        self.width.setValue(inches)
        self.dpi.setValue(300)

    def _unit_changed(self, index: int) -> None:
        old = _UNITS[self._unit_index][1]
        inches = self.width.value() / self.dpi.value() if old is None else self.width.value() * old
        self._unit_index = index
        new = _UNITS[index][1]
        self.width.setDecimals(0 if new is None else 2)
        self.width.setValue(inches * self.dpi.value() if new is None else inches / new)

    def _update_note(self) -> None:
        width = self.width_in()
        least = getattr(self.canvas, "grid_min_width_in", None) if self.layout_box.currentData() == "grid" else None
        widened = least is not None and width < least
        if widened:                    # the figure says so rather than writing a size the dialog did not show
            width = least
        if self.format.currentData() == "png":
            text = f"{round(width * self.dpi.value())} px wide"
        else:
            text = f"{width:.2f} in wide, vector"
        self.size_note.setText(text + (f" (a grid is at least {least:g} in wide: four panels a row)" if widened
                                       else ""))

    def options(self) -> FigureOptions:
        """The settings entered."""
        return FigureOptions(width_in=self.width_in(), dpi=float(self.dpi.value()), font_pt=self.font.value(),
                             line_width_pt=self.line.value(), theme=self.theme.currentData(),
                             layout=self.layout_box.currentData(), bands=self.bands.isChecked(),
                             ci_band=self.ci_band.isChecked(),
                             title=getattr(self.canvas, "title", "") or "")

    def export_to(self, path) -> list:
        """Write the figure to ``path`` (its suffix replaced by the chosen format's); returns the paths written."""
        fmt = self.format.currentData()
        path = Path(path)
        if path.suffix.lower() != "." + fmt:
            path = path.with_suffix("." + fmt)
        return self.canvas.export_figure(path, self.options(), formats=[fmt])

    def _save(self) -> None:
        fmt = self.format.currentData()
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export figure", f"diagram.{fmt}",
                                                        f"{fmt.upper()} (*.{fmt})")
        if not path:
            return
        try:
            self.export_to(path)
        except Exception as e:         # noqa: BLE001 (shown to the user, the dialog stays open)
            QtWidgets.QMessageBox.warning(self, "Export failed", f"{type(e).__name__}: {e}")
            return
        self.accept()
