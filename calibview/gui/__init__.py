"""The PySide6 desktop application: the start-up (``app``), the main window and its menus' helpers (``exports``,
``recent``, ``preferences``), the Session (the Qt face of the window model), the background worker, the status line, the regression mode (``regression_mode``: what the window shows and disables for a regression
run), the CORP toggle and the MCB-DSC tab (``corp_mode``),
the Qt-free window model (``model/``) and the views (``views/``). Imports nothing the core needs."""
