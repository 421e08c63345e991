"""The Qt-free state of the window: the document (open files, the selected run and splits), the settings of the
next request, the latest results of each kind and the "latest request wins" channel that tags each request.
Testable without a display; import-linter keeps Qt out of here."""
