"""File > Open recent: the files opened last, newest first, kept in the window's QSettings."""

from __future__ import annotations

from typing import Callable

from PySide6 import QtCore, QtWidgets

#: how many files the menu lists
MAX_RECENT = 8


class RecentFiles:
    """The "Open recent" menu of the window's recent files: ``remember`` puts a file first, and choosing one calls
    ``open_files([path])``."""

    def __init__(self, settings: QtCore.QSettings, menu: QtWidgets.QMenu, open_files: Callable[[list], None]) -> None:
        self.settings, self.menu, self._open_files = settings, menu, open_files
        self.refresh()

    def files(self) -> list[str]:
        """The recent files, newest first. QSettings (INI, and some native backends) hands a one-item list back as
        a plain string: iterated, that made the menu of its single characters."""
        recent = self.settings.value("recent", []) or []
        return [recent] if isinstance(recent, str) else [str(p) for p in recent]

    def remember(self, path: str) -> None:
        """Put ``path`` (absolute) first, at most MAX_RECENT files in all."""
        recent = [p for p in self.files() if p != path]
        self.settings.setValue("recent", [path] + recent[: MAX_RECENT - 1])
        self.refresh()

    def refresh(self) -> None:
        """Rebuild the menu from the settings (disabled while there is no recent file)."""
        self.menu.clear()
        recent = self.files()
        for p in recent:
            self.menu.addAction(p, lambda p=p: self._open_files([p]))
        self.menu.setEnabled(bool(recent))
