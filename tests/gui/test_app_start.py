"""Start-up defects: missing Qt system libraries (one line, exit 1, not SIGABRT)."""

import pytest

from calibview.gui import app, syslibs


def _loader(missing):
    def load(soname):
        if soname in missing:
            raise OSError(f"{soname}: cannot open shared object file: No such file or directory")
    return load


FAILS = lambda: "libxcb-cursor.so.0: cannot open shared object file: No such file or directory"  # noqa: E731


def test_missing_xcb_libraries_name_the_packages_in_one_line():
    env = {"DISPLAY": ":0"}
    msg = syslibs.xcb_problem(env, _loader({"libxcb-cursor.so.0", "libxkbcommon-x11.so.0"}), FAILS)
    assert "\n" not in msg
    assert "apt-get install libxcb-cursor0 libxkbcommon-x11-0`" in msg
    # a library outside the table: the loader's own words, still one line
    assert "cannot open shared object" in syslibs.xcb_problem(env, _loader(set()), FAILS)


def test_a_plugin_that_loads_is_never_refused():
    """Libraries bundled with the wheel are found by the plugin, not by a bare ctypes lookup."""
    assert syslibs.xcb_problem({"DISPLAY": ":0"}, _loader({"libxcb-cursor.so.0"}), lambda: "") == ""


def test_the_real_probe_agrees_with_the_loader_here():
    """On this machine, whatever its system libraries: the probe of the real plugin refuses only when a library
    really cannot be loaded, and then the one-line message names what the loader named (never a false refusal of
    a working window, never a silent pass over a broken one)."""
    import ctypes

    if syslibs.xcb_plugin() is None:
        pytest.skip("PySide6 without its xcb plugin")
    error = syslibs._probe_plugin()
    msg = syslibs.xcb_problem({"DISPLAY": ":0"})
    if not error:
        assert msg == ""
        return
    soname = error.split(":")[0].strip()
    if soname.startswith("lib") and ".so" in soname:        # the loader named the library it could not open
        with pytest.raises(OSError):
            ctypes.CDLL(soname)
        packages = dict(syslibs.XCB_LIBRARIES)
        if soname in packages:
            assert f" {packages[soname]}" in msg
    assert msg and "\n" not in msg


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
    monkeypatch.setattr(syslibs, "_probe_plugin", FAILS)

    def no_window(*a, **k):
        raise AssertionError("the window must not be created")
    monkeypatch.setattr("calibview.gui.main_window.MainWindow", no_window)
    assert app.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install libxcb-cursor0" in err


def test_a_real_start_with_a_broken_library_exits_1_with_one_line(tmp_path):
    """End to end, in a process: a libxcb-cursor.so.0 that cannot be loaded comes first on the library path.
    Qt would abort (SIGABRT); calibview says which package to install and exits 1."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    if syslibs.xcb_plugin() is None:
        pytest.skip("PySide6 without its xcb plugin")
    (tmp_path / "libxcb-cursor.so.0").write_bytes(b"not a library")
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=":0", LD_LIBRARY_PATH=str(tmp_path), HOME=str(tmp_path),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    r = subprocess.run([sys.executable, "-m", "calibview"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt-get install libxcb-cursor0" in lines[0], r.stderr
