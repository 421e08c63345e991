"""The architecture, enforced from outside the code it constrains.

- import-linter's contracts (pyproject.toml) hold, and they are not vacuous: a Qt import or an upward import
  added to a copy of the core breaks them;
- no import circle anywhere in calibview/, counting every import (tests/_imports.py), no module over 500 lines,
  no folder of more than 15 modules;
- the command line imports the figures and the window only inside functions, so commands that draw nothing
  start without Qt;
- the core, command-line and window-model tests pass with Qt unimportable (tests/qtless.py), and `report` still
  writes everything but the PNG.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import _imports as imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "calibview"
QT = ("calibview.gui", "calibview.plot", "PySide6", "pyqtgraph", "shiboken6")
MAX_LINES = 500
MAX_MODULES_PER_FOLDER = 15
#: the tests that must pass without Qt: everything below the figures, and the window's Qt-free model
QTLESS_TESTS = ("tests/core", "tests/cli", "tests/gui/model")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe)], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(cwd)})


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "calibview", ignore=shutil.ignore_patterns("__pycache__", "*.h5", "*.png"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_contracts_hold():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("line", ["import PySide6.QtCore", "from calibview.gui import app",
                                  "def later():\n    import pyqtgraph\n",
                                  "def later():\n    from calibview.core.evaluation import engine\n"])
def test_a_qt_or_upward_import_in_the_core_breaks_the_contracts(tmp_path, line):
    copy = _copy(tmp_path)
    with open(copy / "calibview" / "core" / "stats" / "metrics.py", "a") as f:
        f.write("\n" + line + "\n")
    r = _lint_imports(copy)
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout + r.stderr


def _module_level_imports(path: Path) -> list[str]:
    """Imports not inside a function body (module level, class bodies, if/try blocks at module level)."""
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if not in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = ([a.name for a in child.names] if isinstance(child, ast.Import) else
                         [_absolute(path, child)])
                found.extend(n for n in names if n.startswith(QT))
            visit(child, inside)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)[:-node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def test_the_command_line_imports_the_figures_and_the_window_only_inside_functions(tmp_path):
    files = sorted((PACKAGE / "cli").glob("*.py"))
    offenders = {p.name: _module_level_imports(p) for p in files}
    assert not {k: v for k, v in offenders.items() if v}, offenders
    # and the check itself sees what it must see
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom calibview.plot import spec\n\ndef f():\n    import PySide6\n")
    assert _module_level_imports(probe) == ["calibview.plot"]


def test_no_import_circle():
    g = imports.graph(ROOT)
    assert len(g) > 50 and g["calibview.cli.program"], "the graph is not vacuous"
    found = [" -> ".join(imports.cycle_path(g, c)) for c in imports.cycles(g)]
    assert not found, "import circles:\n" + "\n".join(found)


def test_the_circle_check_counts_every_kind_of_import(tmp_path):
    pkg = tmp_path / "calibview"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from calibview.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "sub" / "c.py").write_text("import importlib\nM = importlib.import_module('calibview.sub.d')\n")
    (pkg / "sub" / "d.py").write_text("from calibview.sub.a import X\n")
    (pkg / "e.py").write_text("from calibview.sub import nothing_here\n")      # the package itself
    g = imports.graph(tmp_path)
    assert g["calibview.e"] == {"calibview.sub"}
    assert imports.cycles(g) == [["calibview.sub.a", "calibview.sub.b", "calibview.sub.c", "calibview.sub.d"]]
    assert imports.cycle_path(g, imports.cycles(g)[0]) == ["calibview.sub.a", "calibview.sub.b", "calibview.sub.c",
                                                           "calibview.sub.d", "calibview.sub.a"]


def test_modules_read_in_one_sitting():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_folder_of_more_than_fifteen_modules():
    crowded = {}
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        n = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        if n > MAX_MODULES_PER_FOLDER:
            crowded[str(folder.relative_to(ROOT))] = n
    assert not crowded, crowded


def _undocumented(path: Path) -> list[str]:
    """Public functions, classes and methods of public classes without a docstring (Qt's camelCase overrides
    such as ``paintEvent`` are documented by Qt)."""
    out = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.name.startswith("_"):
                    continue
                qt_override = prefix and child.name[:1].islower() and any(c.isupper() for c in child.name)
                if not ast.get_docstring(child) and not (isinstance(child, ast.FunctionDef) and qt_override):
                    out.append(f"{path.relative_to(ROOT)}:{child.lineno} {prefix}{child.name}")
                if isinstance(child, ast.ClassDef):
                    visit(child, prefix + child.name + ".")

    visit(ast.parse(path.read_text()), "")
    return out


def test_every_public_function_and_class_is_documented():
    missing = [m for p in sorted(PACKAGE.rglob("*.py")) for m in _undocumented(p)]
    assert not missing, "\n".join(missing)


def test_every_package_says_what_lives_there():
    silent = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("__init__.py")
              if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not silent, silent


def _qtless(*args: str, cwd: Path = ROOT, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tests" / "qtless.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_the_blocker_really_blocks(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("import pytest\n\ndef test_qt():\n    with pytest.raises(ImportError):\n"
                     "        import PySide6.QtCore\n    with pytest.raises(ImportError):\n        import pyqtgraph\n")
    r = _qtless(str(probe), "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_core_command_line_and_window_model_tests_pass_without_qt():
    # without the captured logs in the report: a dask test's INFO lines would push its assertion out of the tail
    r = _qtless(*QTLESS_TESTS, "-q", "-x", "--show-capture=no")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_report_without_qt_writes_everything_but_the_png(tmp_path):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import qtless; sys.meta_path.insert(0, qtless._NoQt()); "
            "from calibview.cli.program import main; sys.exit(main(['report', '--run', 'resnet110-brier/cifar10', "
            "'--calibrators', 'none,ts', '--n-boot', '20', '--out', sys.argv[2]]))")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests"), str(out)], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    assert {"metrics.csv", "curves.csv", "calibrators.json"} <= {p.name for p in out.iterdir()}
    assert not (out / "diagram.png").exists() and "no diagram.png" in r.stderr
