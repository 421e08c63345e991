"""``calibview desktop-install``: put calibview in the desktop's application menu for the current user.

Copies the freedesktop entry (with ``Exec`` pointing at the calibview that runs this command), the icon at every
size and the HDF5 MIME type under ``--prefix`` (default ``$XDG_DATA_HOME`` or ``~/.local/share``), then refreshes the
desktop and MIME databases when their tools are installed. ``--uninstall`` removes exactly those files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HELP = "add calibview to the desktop's application menu (icon, .desktop entry, .h5 MIME type) for this user"

RESOURCES = Path(__file__).resolve().parents[1] / "resources"


def add_arguments(p) -> None:
    """``--prefix`` (where to install) and ``--uninstall``."""
    default = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    p.add_argument("--prefix", default=default, help=f"data directory to install into (default: {default})")
    p.add_argument("--uninstall", action="store_true", help="remove what desktop-install installed")


def _executable() -> str:
    """The calibview launcher next to this Python (a venv's bin/calibview, or the bundle's executable)."""
    if getattr(sys, "frozen", False):
        return sys.executable
    found = Path(sys.executable).with_name("calibview")
    return str(found) if found.exists() else (shutil.which("calibview") or "calibview")


def targets(prefix: Path) -> dict[Path, Path]:
    """Destination -> source of every installed file."""
    out = {prefix / "applications" / "calibview.desktop": RESOURCES / "calibview.desktop",
           prefix / "mime" / "packages" / "calibview.xml": RESOURCES / "calibview-mime.xml",
           prefix / "icons" / "hicolor" / "scalable" / "apps" / "calibview.svg": RESOURCES / "icons" / "calibview.svg"}
    for png in sorted((RESOURCES / "icons").glob("calibview-*.png")):
        size = png.stem.split("-")[1]
        out[prefix / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "calibview.png"] = png
    return out


def _refresh(prefix: Path) -> None:
    for tool, arg in (("update-desktop-database", prefix / "applications"), ("update-mime-database", prefix / "mime"),
                      ("gtk-update-icon-cache", prefix / "icons" / "hicolor")):
        if shutil.which(tool) and arg.is_dir():
            subprocess.run([tool, "-q", str(arg)] if tool != "update-mime-database" else [tool, str(arg)],
                           capture_output=True, check=False)


def run(args) -> int:
    """Install (or with --uninstall remove) the menu entry, icons and MIME type, then refresh the databases."""
    prefix = Path(args.prefix).expanduser()
    files = targets(prefix)
    if args.uninstall:
        removed = [dest for dest in files if dest.exists()]
        for dest in removed:
            dest.unlink()
        _refresh(prefix)
        print(f"calibview: removed {len(removed)} file(s) under {prefix}")
        return 0
    from calibview.core.io.safe_io import atomic_write

    exe = _executable()
    for dest, src in files.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        if dest.suffix == ".desktop":
            text = data.decode()
            data = (text.replace("Exec=calibview %F", f"Exec={_quote(exe)} %F")
                    .replace("TryExec=calibview", f"TryExec={exe}")).encode()
        atomic_write(dest, data)
    _refresh(prefix)
    print(f"calibview: installed the menu entry, icon and MIME type under {prefix} (Exec={exe})")
    return 0


def _quote(path: str) -> str:
    """Quote an Exec path as the Desktop Entry spec asks when it contains spaces or reserved characters."""
    if not any(c in path for c in ' \t"\'\\><~|&;$*?#()`'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$") + '"'
