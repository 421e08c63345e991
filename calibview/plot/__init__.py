"""The calibration-sharpness figure: a Qt-free figure spec (``spec``), the interactive canvas and its curve items,
navigation, palette and theme, and rendering / export of publication figures (PNG, SVG, PDF).

Draws with pyqtgraph; used by the window and, offscreen, by ``calibview report``. Only ``spec`` is Qt-free."""
