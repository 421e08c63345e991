"""bench_engine.py still runs (--quick: the CIFAR-10 demo run, four calibrators, one repeat, no 21,843-class run)
and writes its section, with a computed yes/no per target, into the file it is given (never RESULTS.md)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_engine_runs_quick(tmp_path):
    pytest.importorskip("PySide6")
    out = tmp_path / "RESULTS.md"
    out.write_text("# before\n\n<!-- bench_engine -->\nold\n<!-- /bench_engine -->\n\n# after\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_engine.py"), "--quick", "--out",
                           str(out)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("# before\n") and text.rstrip().endswith("# after") and "\nold\n" not in text
    assert text.count("<!-- bench_engine -->") == 1 and text.count("<!-- /bench_engine -->") == 1
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| |")]
    assert {r.split("|")[1].strip() for r in rows} == {"a", "b", "c", "d", "f"}
    for r in rows:
        assert r.rstrip(" |").rsplit("|", 1)[1].strip() in ("yes", "**no**", "n/a"), r
    # what the engine recomputes is not timing noise: the counters hold even at --quick sizes
    counters = [r for r in rows if ": counters |" in r]
    assert len(counters) == 2 and all(r.endswith("| yes |") for r in counters), counters
    assert "not run: e (the 21,843-class run): --quick" in text and "Summary:" in text
