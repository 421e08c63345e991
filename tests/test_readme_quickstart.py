"""The README works for a first-time user who copies its commands top to bottom: what a command needs is installed
before it, the system libraries are one list (the one the window checks), the test command is where CI reads it,
the worked examples write into a scratch folder rather than the repository, and every relative link of the README
and of docs/ leads to a file (and heading) that exists."""

import re
from pathlib import Path

from calibview.gui.syslibs import XCB_LIBRARIES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKER = "<!-- test-command -->"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def _commands(block: str) -> list[str]:
    """The block's commands, continuation lines joined, without comments and blank lines."""
    lines = [line.split("#", 1)[0].rstrip() for line in block.splitlines()]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [line for line in joined.splitlines() if line.strip()]


def _before_the_tests() -> list[str]:
    """Every command of the README above the test command, in order: what a new user types first."""
    head = README.read_text().split(MARKER, 1)[0]
    return [line for block in _bash_blocks(head) for line in _commands(block)]


def test_qt_libraries_and_cpu_torch_come_before_the_commands_that_need_them():
    lines = _before_the_tests()
    at = lambda pred: next(i for i, line in enumerate(lines) if pred(line))
    apt = at(lambda l: "apt-get install" in l)
    torch = at(lambda l: "pip install torch" in l and "cpu" in l)
    project = at(lambda l: re.search(r"pip install -e \.(\s|$)", l))
    window = at(lambda l: re.search(r"(&&|^)\s*calibview\s*$", l))
    assert apt < window and torch < project < window


def test_one_list_of_system_libraries_the_one_the_window_checks():
    texts = [README.read_text()] + [doc.read_text() for doc in DOCS]
    apt_lines = [line for text in texts for line in text.splitlines() if "apt-get install" in line]
    assert len(apt_lines) == 1, apt_lines           # a second list would drift from the first
    named = apt_lines[0].split("install", 1)[1].split()
    assert len(named) == len(set(named))
    assert set(named) == {pkg for _, pkg in XCB_LIBRARIES}


def test_ci_reads_a_pytest_command_under_the_marker():
    # .ci/run takes the second line after the marker: awk '/<!-- test-command -->/{getline; getline; print; exit}'
    lines = README.read_text().splitlines()
    i = lines.index(MARKER)
    assert lines[i + 1] == "```bash"
    assert "pytest" in lines[i + 2] and lines[i + 2].startswith("pip install -e \".[test]\"")
    assert MARKER in (ROOT / ".ci" / "run").read_text()


def _writes(command: str) -> bool:
    """Whether a command writes files: an output folder or file, or the example's HDF5 file."""
    return bool(re.search(r"\s(--out|-o|--refit-out)\s|deployment_demo\.py", command + " "))


def test_worked_examples_write_into_a_scratch_folder():
    """Nothing is left in the repository root: in the README every command that writes follows a `mktemp -d` of
    its own block; in the worked example of docs/RELEASE.md, one made before it on the page."""
    for block in _bash_blocks(README.read_text()):
        lines = _commands(block)
        for n, line in enumerate(lines):
            if _writes(line):
                assert any("mktemp -d" in prev for prev in lines[:n]), line
    example = (ROOT / "docs" / "RELEASE.md").read_text().split("## A worked example", 1)[1]
    lines = [line for block in _bash_blocks(example) for line in _commands(block)]
    assert any(_writes(line) for line in lines)
    for n, line in enumerate(lines):
        if _writes(line):
            assert any("mktemp -d" in prev for prev in lines[:n]), line


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_relative_links_resolve():
    broken = []
    for path in [README] + DOCS:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue                                    # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists() or ROOT not in dest.parents:
                broken.append(f"{path.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, broken
