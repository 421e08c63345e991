"""Colours of the light and dark themes and of the calibrators, shared by the canvas and the window.

Calibrator colours come from palette.py (3:1 against both backgrounds, neighbours distinguishable under
deuteranopia) and are stable: a known calibrator keeps its colour whichever others are shown, and in both themes.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6 import QtGui

__all__ = ["Theme", "THEMES", "OKABE_ITO", "calibrator_color", "themed_color", "qcolor", "qt_palette"]

#: Okabe & Ito (2008), "Color Universal Design"; black is left out (it vanishes on the dark theme).
OKABE_ITO = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish_green": "#009E73",
    "reddish_purple": "#CC79A7",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "yellow": "#F0E442",
}

def calibrator_color(name: str, index: int = 0) -> str:
    """'#RRGGBB' for calibrator ``name``: fixed for the known calibrators (palette.PREFERRED, distinct and
    3:1 against both backgrounds), else the ``index``-th palette colour. A figure showing several items uses
    ``palette.assign_colors`` instead, which never gives two shown items one colour."""
    from calibview.plot.palette import PALETTE, PREFERRED
    fixed = PREFERRED.get(str(name).lower())
    if fixed is not None:
        return fixed
    return PALETTE[int(index) % len(PALETTE)]


def _luminance(hex_color: str) -> float:
    """WCAG relative luminance of '#RRGGBB'."""
    c = QtGui.QColor(hex_color)

    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF())


def themed_color(hex_color: str, theme: str) -> str:
    """The colour as drawn on ``theme``: on the dark background the darkest palette entries (Okabe-Ito blue) are
    lightened just enough to keep a thin line readable; the hue, and so the identity, stays the same."""
    if theme == "dark" and _luminance(hex_color) < 0.2:
        return QtGui.QColor(hex_color).lighter(145).name().upper()
    return hex_color


@dataclass(frozen=True)
class Theme:
    """One look of the canvas and the window. Colours are '#RRGGBB'; alphas are 0..255."""

    name: str
    background: str         # plot and window background
    panel: str              # docks, tables (slightly off the background)
    foreground: str         # text, axes
    muted: str              # secondary text (subtitle, readout units)
    grid: str               # grid lines (drawn with grid_alpha)
    grid_alpha: int
    diagonal: str           # the perfect-calibration line
    hover: str              # the vertical hover line
    legend_fill: str        # legend box, drawn with legend_alpha
    legend_alpha: int
    legend_border: str
    highlight: str          # selection in lists and tables
    band_alpha: int         # sharpness band fill
    band_edge_alpha: int    # sharpness band outline
    density_alpha: int      # density strip fill
    error_bar_alpha: int    # reliability-bin error bars


THEMES: dict[str, Theme] = {
    "light": Theme(
        name="light", background="#FFFFFF", panel="#F5F5F5", foreground="#1A1A1A", muted="#6B6B6B",
        grid="#000000", grid_alpha=28, diagonal="#7A7A7A", hover="#444444", legend_fill="#FFFFFF",
        legend_alpha=225, legend_border="#BDBDBD", highlight="#CFE3F5", band_alpha=26, band_edge_alpha=120,
        density_alpha=40, error_bar_alpha=200),
    "dark": Theme(
        name="dark", background="#121417", panel="#1C1F24", foreground="#E6E6E6", muted="#9AA0A6",
        grid="#FFFFFF", grid_alpha=30, diagonal="#8A8F96", hover="#C8C8C8", legend_fill="#1C1F24",
        legend_alpha=225, legend_border="#4A4F57", highlight="#2F4A66", band_alpha=34, band_edge_alpha=140,
        density_alpha=50, error_bar_alpha=220),
}


def qcolor(hex_color: str, alpha: int = 255) -> QtGui.QColor:
    """'#RRGGBB' as a QColor with opacity ``alpha`` (0 to 255)."""
    c = QtGui.QColor(hex_color)
    c.setAlpha(int(alpha))
    return c


def qt_palette(name: str) -> QtGui.QPalette:
    """A QPalette matching theme ``name`` for the window (apply with QApplication.setPalette; the Fusion style
    follows it on every platform)."""
    t = THEMES[name]
    pal = QtGui.QPalette()
    role = QtGui.QPalette.ColorRole
    group = QtGui.QPalette.ColorGroup
    fg, bg, panel, muted = QtGui.QColor(t.foreground), QtGui.QColor(t.background), QtGui.QColor(t.panel), \
        QtGui.QColor(t.muted)
    for r, c in ((role.Window, panel), (role.WindowText, fg), (role.Base, bg), (role.AlternateBase, panel),
                 (role.Text, fg), (role.Button, panel), (role.ButtonText, fg), (role.ToolTipBase, panel),
                 (role.ToolTipText, fg), (role.PlaceholderText, muted), (role.BrightText, QtGui.QColor("#FF5555")),
                 (role.Highlight, QtGui.QColor(t.highlight)), (role.HighlightedText, fg),
                 (role.Link, QtGui.QColor(OKABE_ITO["sky_blue"] if name == "dark" else OKABE_ITO["blue"]))):
        pal.setColor(r, c)
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(group.Disabled, r, muted)
    return pal
