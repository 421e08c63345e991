"""Issue 11: the README quick start installs what a command needs before the command (a first-time user copies
it top to bottom)."""

import re
from pathlib import Path

from calibview.gui.syslibs import XCB_LIBRARIES

README = Path(__file__).resolve().parents[1] / "README.md"


def _quick_start_lines() -> list[str]:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_qt_libraries_and_cpu_torch_come_before_the_commands_that_need_them():
    lines = _quick_start_lines()
    at = lambda pred: next(i for i, line in enumerate(lines) if pred(line))
    apt = at(lambda l: "apt-get install" in l)
    torch = at(lambda l: "pip install torch" in l and "cpu" in l)
    project = at(lambda l: "pip install -e ." in l)
    window = at(lambda l: re.search(r"(&&|^)\s*calibview\s*$", l))
    assert apt < window and torch < project <= window


def test_the_apt_line_names_packages_the_window_checks():
    apt = next(l for l in _quick_start_lines() if "apt-get install" in l)
    known = {pkg for _, pkg in XCB_LIBRARIES}
    named = set(apt.split("install", 1)[1].split())
    assert "libxcb-cursor0" in named and named <= known
