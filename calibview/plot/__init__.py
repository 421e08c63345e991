"""The calibration-sharpness figure: Qt-free figure specs (``spec``, and ``compare`` for compared runs), the
interactive canvas and its curve items, overlay, grid layout, navigation, palette and theme, and rendering /
export of figures (PNG, SVG, PDF).

Draws with pyqtgraph; used by the window and, offscreen, by ``calibview report``. Only ``spec``, ``compare`` and
``palette`` are Qt-free."""
