"""The benchmark suite still runs (--quick: tiny sizes, one repeat) and prints every row of its table."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_benchmark_suite_runs_quick(tmp_path):
    md, js = tmp_path / "table.md", tmp_path / "rows.json"
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--markdown",
                          str(md), "--json", str(js)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    table = md.read_text()
    for task in ("load a split", "top-label ECE", "SmoothECE", "diagram: CAL, TOT", "temperature scaling fit",
                 "vector scaling, per iteration", "matrix scaling, per iteration", "histogram binning",
                 "isotonic regression", "report none,ts,vs,hb,ir", "report none,ts, all metrics, no intervals",
                 "bandwidth change", "peak memory"):
        assert task in table, task
    # the values agree with the peers even at these sizes
    assert "DIFFERENT" not in table and "sharpcal not installed" not in table
    assert "had not finished" not in table                  # the last save marks the run complete
    saved = json.loads(js.read_text())
    assert saved["finished"] is True
    rows = saved["rows"]
    diffs = [r for r in rows if r["agree"].startswith(("|diff|", "max |diff|"))]
    assert len(diffs) >= 10
    for r in diffs:
        # torchmetrics bins float32 confidences (RESULTS.md): a sample near a bin edge can land in the next bin
        tol = 1e-4 if r["peer"].startswith("torchmetrics") else 1e-6
        assert float(r["agree"].split("|diff| ")[1]) < tol, r


def test_float32_fit_benchmark_writes_its_section(tmp_path):
    md = tmp_path / "RESULTS.md"
    md.write_text("# results\n\n<!-- other -->\nkept\n<!-- /other -->\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_float32_fit.py"), "--quick",
                          "--out", str(md)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = md.read_text()
    assert "<!-- other -->\nkept\n<!-- /other -->" in text            # the other sections stay as they were
    section = text[text.index("<!-- bench_float32_fit -->"):text.index("<!-- /bench_float32_fit -->")]
    for row in ("one objective + gradient evaluation", "the fit: float64 L-BFGS", "then float64",
                "largest difference of the fitted (W, b)", "start moved by 1e-6"):
        assert row in section, row
    assert "the float32 start could be kept" in section or "the float32 start is not kept" in section


def test_a_section_written_midway_says_the_run_had_not_finished(monkeypatch):
    """run.py saves its section after every row, so a run stopped midway (the full suite takes the better part of
    an hour) leaves a section that names the sizes it has rows for, not one that looks complete."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "benchmarks", "run.py"))
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_run", run)         # its dataclasses resolve their module by name
    spec.loader.exec_module(run)
    rows = [run.Row("10,000 x 10", "load a split (validated)", 0.004, "bare h5py ds[...] (floor)", 0.001),
            run.Row("50,000 x 100", "load a split (validated)", 0.016, "bare h5py ds[...] (floor)", 0.011)]
    partial = run.to_markdown(rows, "header", "10,000 x 10, 50,000 x 100, 50,000 x 1,000", finished=False)
    assert "had not finished" in partial and "rows so far: 10,000 x 10, 50,000 x 100)" in partial
    assert "had not finished" not in run.to_markdown(rows, "header", "10,000 x 10, 50,000 x 100")
