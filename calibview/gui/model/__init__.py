"""The Qt-free state of the window: the document (open files, the selected run and splits) and the settings of the
next request (``document``), the "latest request wins" channel that tags each background request (``channel``),
the window model holding the latest result of each kind (``window``), and what the Decisions and Slices views show
(``decisions``, ``slice_results``), and the CORP curves the window shows with their own channel (``corp``).
Testable without a display; import-linter keeps Qt out of here."""
