"""Start-up defects of issue 11: missing Qt system libraries (one line, exit 1, not SIGABRT)."""

import pytest

from calibview.gui import app, syslibs


def _loader(missing):
    def load(soname):
        if soname in missing:
            raise OSError(f"{soname}: cannot open shared object file: No such file or directory")
    return load


def test_missing_xcb_libraries_name_the_packages_in_one_line():
    env = {"DISPLAY": ":0"}
    msg = syslibs.xcb_problem(env, _loader({"libxcb-cursor.so.0", "libxkbcommon-x11.so.0"}))
    assert "\n" not in msg
    assert "apt-get install libxcb-cursor0 libxkbcommon-x11-0`" in msg
    assert syslibs.xcb_problem(env, _loader(set())) == ""


def test_only_the_x11_plugin_is_checked():
    assert syslibs.uses_xcb({"DISPLAY": ":0"}, "linux")
    assert syslibs.uses_xcb({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not syslibs.uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not syslibs.uses_xcb({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, "linux")
    assert not syslibs.uses_xcb({"DISPLAY": ":0"}, "darwin")


def test_the_window_exits_1_with_the_message_before_creating_qapplication(monkeypatch, capsys):
    """Simulated: libxcb-cursor0 absent (the usual case on a fresh Debian/Ubuntu)."""
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(syslibs, "_load", _loader({"libxcb-cursor.so.0"}))

    def no_window(*a, **k):
        raise AssertionError("the window must not be created")
    monkeypatch.setattr("calibview.gui.main_window.MainWindow", no_window)
    assert app.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install libxcb-cursor0" in err
