"""Quitting: the real program, in its own process and event loop, closes in well under a second, with its worker
cancelled and joined and its settings written. (The interpreter's teardown of the engine's cache, torch, Qt and
pyqtgraph took seconds of every quit.)"""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs calibview.gui.app.main as the program does; once the demo's evaluation is shown (intervals included) it
# closes the window from the event loop, as Ctrl+Q does, and reports when it did and whether the worker was joined.
DRIVER = textwrap.dedent("""
    import sys, time
    from PySide6 import QtCore, QtWidgets
    from calibview.gui import app as gui_app
    from calibview.gui import session as session_module

    joined = []
    real_shutdown = session_module.Session.shutdown

    def shutdown(self, *a, **k):
        real_shutdown(self, *a, **k)
        joined.append(self._thread.isFinished())

    session_module.Session.shutdown = shutdown
    qapp = QtWidgets.QApplication([sys.argv[0]])

    def poll():
        w = next((w for w in qapp.topLevelWidgets() if type(w).__name__ == "MainWindow"), None)
        ev = w.session.evaluation if w is not None else None
        if ev is None or ev.pending or w.session.busy:
            return
        timer.stop()
        print("quit", repr(time.time()), flush=True)
        w.close()
        print("joined", joined, flush=True)

    timer = QtCore.QTimer()
    timer.timeout.connect(poll)
    timer.start(20)
    status = gui_app.main(sys.argv[1:])
    print("main returned", status, flush=True)           # never: the process ends in main
""")


def test_quitting_takes_under_a_second_and_joins_the_worker(tmp_path, demo_file):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(driver), str(demo_file), "--calibrators", "ts,vs"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    ended = time.time()
    assert proc.returncode == 0, err[-2000:]
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "quit" in lines, out + err[-2000:]
    took = ended - float(lines["quit"])
    assert lines["joined"] == "[True]"                  # shutdown ran once, and the thread had finished
    assert took < 1.0, f"the quit took {took:.2f} s"
    assert "main returned" not in out
    settings = (tmp_path / "config" / "calibview" / "calibview.conf").read_text()
    assert "geometry=" in settings and "bandwidth=" in settings      # written before the process ended
    assert "Destroyed while thread" not in err
