"""Defects found by a first-time user, each pinned: recent files, the status bar's fields, stale
progress text after a failure."""

import pytest

WAIT_MS = 120_000
pytestmark = pytest.mark.window(n_boot=0)


def _wait_idle(qtbot, w):
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=WAIT_MS)


def _recent_titles(w):
    return [a.text() for a in w.recent_menu.actions()]


def test_open_recent_keeps_whole_paths_after_a_second_file(qtbot, make_window, tmp_path, demo_file):
    """A previous session that opened one file leaves `recent=/path` in the settings file, which reads back as a
    plain string; iterated, it made the menu "/", "t", "m", ... once a second file was opened."""
    ini = tmp_path / "previous-session.ini"       # never opened in this process: Qt parses the file itself
    ini.write_text(f"[General]\nrecent={demo_file.resolve()}\n")
    second = tmp_path / "copy.h5"
    second.write_bytes(demo_file.read_bytes())
    w = make_window(n_boot=0, settings=ini.name, show=False)
    assert _recent_titles(w) == [str(demo_file.resolve())]
    w.open_files([second])
    _wait_idle(qtbot, w)
    assert _recent_titles(w) == [str(second.resolve()), str(demo_file.resolve())]


def test_hover_readout_has_its_own_field_and_leaves_the_status_alone(qtbot, window, demo_file):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    window.resize(1000, 650)
    qtbot.wait(50)
    status = window.progress_label.text()
    assert status.startswith("Evaluated in")
    long = "conf 0.52 | " + " | ".join(f"cal{i}: acc 0.44, density 0.09, n≈494 within ±0.05" for i in range(8))
    window.domains.hover_changed.emit(long)
    qtbot.wait(50)
    assert window.hover_label is not window.progress_label
    assert window.progress_label.text() == status
    hover, stat = window.hover_label.geometry(), window.progress_label.geometry()
    assert hover.right() < stat.left()                         # side by side, never on top of each other
    assert window.progress_label.displayed_text() == status     # the status is shown whole
    shown = window.hover_label.displayed_text()
    assert shown.endswith("…") and long.startswith(shown[:-1])  # the readout is elided at its field's edge


def test_a_long_progress_message_is_elided_at_its_end_not_widening_the_window(qtbot, window):
    before = window.minimumSizeHint().width()
    message = "Reading " + "very-long-model-name/" * 12 + "test (10,000 × 100 logits)…"
    window.progress_label.setText(message)
    window.resize(1000, 650)
    qtbot.wait(50)
    assert window.minimumSizeHint().width() <= before + 5
    shown = window.progress_label.displayed_text()
    assert shown.startswith("Reading") and shown.endswith("…")   # its beginning stays readable


def test_a_failed_evaluation_does_not_leave_its_reading_message(qtbot, window, nan_file):
    messages = []
    window.session.progress_changed.connect(lambda f, m: messages.append(m))
    window.open_files([nan_file])
    qtbot.waitUntil(lambda: window.last_error is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.session.busy, timeout=WAIT_MS)
    qtbot.wait(50)
    assert messages, "the evaluation reported progress before failing"
    text = window.progress_label.text()
    assert not text.startswith("Reading") and text not in messages
    assert "failed" in text.lower()
