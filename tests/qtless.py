"""Run pytest with PySide6, shiboken6 and pyqtgraph made unimportable, as on a machine without Qt.

    python tests/qtless.py tests/core tests/cli tests/gui/model -q

Used by tests/test_architecture.py (in a subprocess); the tests that draw are marked ``qt`` and deselected."""

import importlib.abc
import sys

BLOCKED = ("PySide6", "shiboken6", "pyqtgraph")


class _NoQt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (Qt is blocked for this run)", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, _NoQt())
    import pytest

    sys.exit(pytest.main(["-p", "no:pytest-qt", "-p", "no:cacheprovider", "-m", "not qt", *sys.argv[1:]]))
