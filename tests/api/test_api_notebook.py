"""examples/quickstart.ipynb runs clean (nbclient, a test extra), and its outputs are what a reader expects: the
metrics table as HTML, the diagram as a PNG."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbclient and ipykernel are test extras")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


def test_the_quickstart_notebook_runs_clean(tmp_path, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html and "ECE" in html[0] and "[" in html[0]
    png = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert png and base64.b64decode(png[0])[:8] == b"\x89PNG\r\n\x1a\n"
    text = "".join(o.get("text", "") for o in outputs)
    assert "temperature" in text and "ECE" in text
    (tmp_path / "executed.ipynb").write_text(nbformat.writes(nb))
