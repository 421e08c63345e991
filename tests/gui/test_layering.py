"""The window depends on the core and the figures, never on the command line (which draws through calibview.plot)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import calibview.gui
from calibview.core.io.demo import demo_path

GUI = Path(calibview.gui.__file__).resolve().parent


def _imported_modules(path: Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                       # relative: resolve against calibview.gui
                parent = ["calibview", "gui"][:max(0, 3 - node.level)]
                base = ".".join(parent + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def test_gui_modules_do_not_import_the_cli():
    """Not even lazily inside a function: cli -> gui (PNG export) -> cli would be an import circle."""
    offenders = {str(p.relative_to(GUI)): sorted(n for n in _imported_modules(p)
                                                 if n.split(".")[:2] == ["calibview", "cli"])
                 for p in sorted(GUI.rglob("*.py"))}
    assert not {k: v for k, v in offenders.items() if v}


def test_opening_the_demo_leaves_the_cli_unimported(tmp_path):
    code = ("import sys; from PySide6 import QtCore, QtWidgets; app = QtWidgets.QApplication([]); "
            "from calibview.gui.main_window import MainWindow; "
            "MainWindow.open_files = lambda self, paths: print(*paths); "     # the path, not an evaluation
            "w = MainWindow(settings=QtCore.QSettings(sys.argv[1], QtCore.QSettings.IniFormat)); "
            "w.open_demo(); w.close(); "
            "sys.exit(1 if 'calibview.cli.program' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "settings.ini")], capture_output=True, text=True,
                       env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert r.returncode == 0 and r.stdout.strip().endswith("demo.h5"), r.stdout + r.stderr


def test_demo_path_lives_in_the_core():
    assert demo_path().is_file() and demo_path().name == "demo.h5"


def test_building_the_window_loads_no_scipy_stats(tmp_path):
    """scipy.stats takes 0.2-1 s to import; the window's start-up needs none of it (regression runs and the
    tests that use it import it when they evaluate)."""
    code = ("import sys; from PySide6 import QtCore, QtWidgets; app = QtWidgets.QApplication([]); "
            "from calibview.gui.main_window import MainWindow; "
            "w = MainWindow(settings=QtCore.QSettings(sys.argv[1], QtCore.QSettings.IniFormat)); w.close(); "
            "print(sorted(m for m in sys.modules if m in ('scipy.stats', 'scipy.optimize')))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "settings.ini")], capture_output=True, text=True,
                       env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr
