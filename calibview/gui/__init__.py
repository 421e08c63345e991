"""The PySide6 + pyqtgraph desktop viewer; imports nothing the core needs."""
