"""Before QApplication: can Qt's X11 (xcb) platform plugin load? Without its system libraries Qt aborts the
process (SIGABRT, "could not load the Qt platform plugin xcb") with a paragraph that names no package; the window
checks them first and says, in one line, which Debian/Ubuntu packages to install. No Qt import here.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

#: The system libraries PySide6's libqxcb.so / libQt6XcbQpa.so.6 link against, and the package that ships each.
XCB_LIBRARIES = (
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libxkbcommon.so.0", "libxkbcommon0"), ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"), ("libxcb-image.so.0", "libxcb-image0"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"), ("libxcb-randr.so.0", "libxcb-randr0"),
    ("libxcb-shape.so.0", "libxcb-shape0"), ("libxcb-xkb.so.1", "libxcb-xkb1"), ("libxcb-sync.so.1", "libxcb-sync1"),
    ("libxcb-xfixes.so.0", "libxcb-xfixes0"), ("libxcb-shm.so.0", "libxcb-shm0"),
    ("libxcb-util.so.1", "libxcb-util1"), ("libX11-xcb.so.1", "libx11-xcb1"), ("libEGL.so.1", "libegl1"),
    ("libGL.so.1", "libgl1"), ("libfontconfig.so.1", "libfontconfig1"),
)


def uses_xcb(environ=None, platform: str = sys.platform) -> bool:
    """Whether Qt will pick its X11 plugin: Linux with an X display and no other platform chosen."""
    env = os.environ if environ is None else environ
    if not platform.startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def _load(soname: str) -> None:
    ctypes.CDLL(soname)


def missing_xcb_packages(load=None) -> list[str]:
    """The packages whose library cannot be loaded (empty when the plugin has all it needs)."""
    load = load or _load
    missing = []
    for soname, package in XCB_LIBRARIES:
        try:
            load(soname)
        except OSError:
            missing.append(package)
    return list(dict.fromkeys(missing))


def xcb_plugin() -> "Path | None":
    """PySide6's libqxcb.so, found without importing Qt; None when it is not where the wheels put it."""
    spec = importlib.util.find_spec("PySide6")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if path.exists():
            return path
    return None


def _probe_plugin() -> str:
    """The loader's error when the xcb plugin cannot be loaded, "" when it can (or cannot be found). In a
    subprocess: the plugin resolves its dependencies with its own search path (libraries bundled with the wheel
    count), and a failure cannot disturb this process."""
    path = xcb_plugin()
    if path is None:
        return ""
    try:
        r = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(path)],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if r.returncode == 0:
        return ""
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("OSError: ") if lines else f"exit status {r.returncode}"


def xcb_problem(environ=None, load=None, probe=None) -> str:
    """One line naming the packages to install, or "" when the window can start (or Qt will not use xcb)."""
    if not uses_xcb(environ):
        return ""
    error = (probe or _probe_plugin)()
    if not error:
        return ""
    missing = missing_xcb_packages(load)
    fix = (f"install them with `sudo apt-get install {' '.join(missing)}`" if missing else
           f"the loader says: {error}")
    return (f"Qt's X11 plugin cannot load: system libraries are missing; {fix} (or run without a window: "
            f"`calibview report --out DIR`).")
