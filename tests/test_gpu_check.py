"""benchmarks/gpu_check.sh runs on a CPU-only machine (``--device cpu``: cpu against cpu) at a tiny size, writes
only its own section of the results file, and its comparison tells agreement from disagreement."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_on_cpu_writes_its_section(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- run.py -->\nkept\n<!-- /run.py -->\n\n"
                       "<!-- gpu_check -->\nold section\n<!-- /gpu_check -->\n\ntail kept\n")
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    p = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--device", "cpu", "--rows", "400",
                        "--classes", "8", "--n-boot", "50", "--repeats", "1", "--results", str(results),
                        "--pytest-paths", "tests/core/evaluation/test_evaluate.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = results.read_text()
    assert "old section" not in text and "<!-- run.py -->\nkept\n<!-- /run.py -->" in text
    assert text.endswith("<!-- /gpu_check -->\n\ntail kept\n") and text.count("<!-- gpu_check -->") == 1
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["b"].rstrip().endswith("| n/a |") and "not measured (no GPU" in rows["b"]
    # the cuda tests: skipped without a GPU (n/a), never failing
    assert rows["a"].rstrip().endswith(("| yes |", "| n/a |")) and "skipped" in rows["a"], rows["a"]
    for item in "cdef":                  # agreement, no Qt
        assert rows[item].rstrip().endswith("| yes |"), rows[item]
    assert "0 of " in rows["c"] and "values differ" in rows["d"] and "400 x 8" in text
    assert "calibview: evaluated synthetic/bench fit=val eval=test" in text


def test_compare_applies_each_tolerance():
    g = _module()
    ref = [{"calibrator": "ts", "n": 400, "nonfinite": {}, "nll": 0.5, "nll_lo": 0.4, "nll_hi": 0.6,
            "accuracy_lo": 0.8, "auroc_lo": None}]
    same = g.compare(ref, [dict(ref[0], nll_lo=0.4 + 1e-7)])
    assert not any(c["failed"] for c in same.values())
    assert same["float32"]["worst"][0][0] == "nll_lo" and 0 < same["float32"]["worst"][0][5] < 1e-5
    bad = g.compare(ref, [dict(ref[0], n=401, nll=0.5 + 1e-8, nll_hi=0.6 + 1e-4, accuracy_lo=0.8 + 1e-8,
                               auroc_lo=0.7)])
    assert sorted(f[0] for f in bad["exact"]["failed"]) == ["auroc_lo", "n"]
    assert sorted(f[0] for f in bad["float64"]["failed"]) == ["accuracy_lo", "nll"]
    assert [f[0] for f in bad["float32"]["failed"]] == ["nll_hi"]


def test_log_line_matches_the_cli_format():
    g = _module()
    m = g.LOG_LINE.search("calibview: warning: x\ncalibview: evaluated synthetic/bench fit=val eval=test: fitted 1, "
                          "reused 0, scored 2, 12.34 s\n")
    assert m and m["seconds"] == "12.34" and m["scored"] == "2"
