"""The PySide6 desktop application: the app start-up, the main window, the background worker, the status line,
the Qt-free window model (``model/``) and the views (``views/``). Imports nothing the core needs."""
