"""The architecture, enforced from outside the code it constrains.

- import-linter's contracts (pyproject.toml) hold, and they are not vacuous: a Qt import added to a copy of the
  core breaks them;
- the command line's imports of the window stay inside functions (import-linter counts those as imports too, so
  the contract lists them as exceptions; this test makes sure they stay lazy);
- the core and the command-line tests pass with Qt unimportable (tests/qtless.py), and `report` still writes
  everything but the PNG.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "calibview"
QT = ("calibview.gui", "PySide6", "pyqtgraph", "shiboken6")


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


@pytest.mark.parametrize("line", ["import PySide6.QtCore", "from ..gui import canvas",
                                  "def later():\n    import pyqtgraph\n"])
def test_a_qt_import_in_the_core_breaks_the_contract(tmp_path, line):
    copy = _copy(tmp_path)
    with open(copy / "calibview" / "core" / "metrics.py", "a") as f:
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


def test_the_command_line_imports_the_window_only_inside_functions():
    files = [PACKAGE / "cli.py", *sorted((PACKAGE / "commands").glob("*.py"))]
    offenders = {p.name: _module_level_imports(p) for p in files}
    assert not {k: v for k, v in offenders.items() if v}, offenders
    # and the check itself sees what it must see
    probe = PACKAGE.parent / "calibview" / "cli.py"
    assert "calibview.gui.app" not in _module_level_imports(probe)


def _qtless(*args: str, cwd: Path = ROOT, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tests" / "qtless.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_the_blocker_really_blocks(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("import pytest\n\ndef test_qt():\n    with pytest.raises(ImportError):\n"
                     "        import PySide6.QtCore\n    with pytest.raises(ImportError):\n        import pyqtgraph\n")
    r = _qtless(str(probe), "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_core_and_command_line_tests_pass_without_qt():
    r = _qtless("tests/core", "tests/cli", "-q", "-x")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_report_without_qt_writes_everything_but_the_png(tmp_path):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import qtless; sys.meta_path.insert(0, qtless._NoQt()); "
            "from calibview.cli import main; sys.exit(main(['report', '--run', 'resnet110-brier/cifar10', "
            "'--calibrators', 'none,ts', '--n-boot', '20', '--out', sys.argv[2]]))")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests"), str(out)], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    assert {"metrics.csv", "curves.csv", "calibrators.json"} <= {p.name for p in out.iterdir()}
    assert not (out / "diagram.png").exists() and "no diagram.png" in r.stderr
