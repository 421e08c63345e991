"""Files that fail to open in the window (a corrupt chunk B-tree, groups nested 1,500 deep, whatever h5py
raises): a dialog, never a traceback, and no worker thread left running, whether opened at start-up, from File >
Open or from Open recent."""

import subprocess
import sys
from pathlib import Path

import pytest

from _budget_files import corrupt_btree, deep_nesting, tiny_chunks

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = {"btree": corrupt_btree, "deep": deep_nesting}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_hostile_file_from_open_recent_shows_a_dialog(qtbot, make_window, tmp_path, kind):
    path = tmp_path / f"{kind}.h5"
    BUILDERS[kind](path)
    w = make_window(show=False)
    w.recent.remember(str(path))
    w.recent.refresh()
    actions = [a for a in w.recent_menu.actions() if a.text() == str(path)]
    assert actions, [a.text() for a in w.recent_menu.actions()]
    actions[0].trigger()
    qtbot.waitUntil(lambda: getattr(w, "last_error", None) is not None, timeout=10_000)
    title, text = w.last_error
    assert title == "Cannot open file"
    assert str(path) in text and "\n" not in text and "Traceback" not in text
    assert not w.session.files
    assert w.error_box is not None                  # the dialog itself


def test_h5py_errors_while_opening_become_a_dialog(session, monkeypatch, tmp_path):
    from calibview.gui.model import window as model_window

    errors = []
    session.error_occurred.connect(lambda title, text: errors.append(text))

    def broken(path):
        raise RuntimeError("wrong B-tree signature")

    monkeypatch.setattr(model_window, "list_runs", broken)
    assert session.open_file(tmp_path / "x.h5") is False
    assert errors and "wrong B-tree signature" in errors[0]


_START = """
import sys
from calibview.gui.app import main
sys.exit(main(sys.argv[1:], exit_process=False))
"""


@pytest.mark.parametrize("args", [["{btree}", "{good}", "--run", "nope"], ["{deep}", "{good}", "--run", "nope"]])
def test_a_failed_start_stops_the_worker_thread(tmp_path, args):
    """Qt aborted the process (SIGABRT, "QThread: Destroyed while thread is still running") when the window's
    start-up raised and main returned with the worker thread still running."""
    files = {"btree": tmp_path / "b.h5", "deep": tmp_path / "d.h5", "good": tmp_path / "g.h5"}
    corrupt_btree(files["btree"])
    deep_nesting(files["deep"])
    tiny_chunks(files["good"], 20, 3, chunks=(20, 3))
    argv = [a.format(**files) for a in args]
    env = {"QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _START, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "QThread" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
