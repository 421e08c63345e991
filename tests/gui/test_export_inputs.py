"""A window export never replaces the file it shows; File > Export figure opens the publication dialog."""

from __future__ import annotations

import os
import shutil

import pytest
from PySide6 import QtGui

pytestmark = pytest.mark.qt


def test_export_onto_the_open_file_is_refused(qtbot, make_window, tmp_path, demo_file):
    data = tmp_path / "demo.h5"
    shutil.copyfile(demo_file, data)
    os.link(data, tmp_path / "alias.csv")
    w = make_window(n_boot=0)
    w.open_files([data])
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=120_000)
    before = (data.read_bytes(), os.stat(data).st_mtime_ns)
    for kind, path in (("metrics", data), ("json", tmp_path / "alias.csv"), ("png", data)):
        w.last_error = None
        assert w.export(kind, str(path)) is None
        assert w.last_error is not None and "one of the inputs being read" in w.last_error[1]
        if w.error_box is not None:
            w.error_box.close()
    assert (data.read_bytes(), os.stat(data).st_mtime_ns) == before
    assert w.export("json", str(tmp_path / "c.json"))


def test_file_menu_opens_the_publication_export_dialog(qtbot, make_window, demo_file, monkeypatch):
    """File > Export figure (Ctrl+E) is the PNG/SVG/PDF dialog with size and DPI, not a screen grab."""
    from calibview.plot import export_dialog

    opened = []
    monkeypatch.setattr(export_dialog.ExportDialog, "exec", lambda self: opened.append(self.options()) or 0)
    w = make_window(n_boot=0)
    (action,) = [a for a in w.findChildren(QtGui.QAction) if a.shortcut().toString() == "Ctrl+E"]
    action.trigger()
    assert not opened and w.last_error is not None            # nothing evaluated yet: one sentence, no dialog
    if w.error_box is not None:
        w.error_box.close()
    w.open_files([demo_file])
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=120_000)
    action.trigger()
    assert len(opened) == 1 and opened[0].dpi > 0
