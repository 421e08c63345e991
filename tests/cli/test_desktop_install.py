"""calibview desktop-install: a valid freedesktop entry pointing at this calibview, icons at every size, the MIME type."""

import configparser
import shutil
import subprocess

import struct

import pytest

from calibview.cli import main
from calibview.cli import desktop_install


def test_installs_entry_icons_and_mime_type_then_removes_exactly_them(tmp_path, capsys):
    prefix = tmp_path / "share"
    (prefix / "applications").mkdir(parents=True)
    (prefix / "applications" / "other.desktop").write_text("[Desktop Entry]\nName=other\n")
    assert main(["desktop-install", "--prefix", str(prefix)]) == 0
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(prefix / "applications" / "calibview.desktop")
    d = entry["Desktop Entry"]
    exe = d["Exec"].rsplit(" ", 1)
    assert exe[1] == "%F" and exe[0].endswith("calibview")          # the launcher of this environment
    assert d["Icon"] == "calibview" and "application/x-hdf5" in d["MimeType"]
    for size in desktop_install_sizes():
        png = prefix / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "calibview.png"
        assert png_size(png) == (size, size)
    assert (prefix / "mime" / "packages" / "calibview.xml").is_file()
    if shutil.which("desktop-file-validate"):
        r = subprocess.run(["desktop-file-validate", str(prefix / "applications" / "calibview.desktop")],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "error" not in r.stdout, r.stdout
    assert main(["desktop-install", "--prefix", str(prefix), "--uninstall"]) == 0
    assert not (prefix / "applications" / "calibview.desktop").exists()
    assert (prefix / "applications" / "other.desktop").exists()           # never touches what it did not install
    assert not list((prefix / "icons").rglob("calibview.png"))


def png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def desktop_install_sizes():
    return [int(p.stem.split("-")[1]) for p in (desktop_install.RESOURCES / "icons").glob("calibview-*.png")]


def test_every_standard_icon_size_is_rendered():
    assert sorted(desktop_install_sizes()) == [16, 24, 32, 48, 64, 128, 256, 512]


@pytest.mark.parametrize("path,quoted", [("/opt/calibview/calibview", "/opt/calibview/calibview"),
                                         ("/home/a b/calibview", '"/home/a b/calibview"')])
def test_exec_paths_with_spaces_are_quoted(path, quoted):
    assert desktop_install._quote(path) == quoted
