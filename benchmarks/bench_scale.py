"""A split larger than memory: a 2,000,000 x 1,000 float16 file streamed from disk (time, peak memory, cancel).

    python benchmarks/bench_scale.py [--rows 2000000] [--classes 1000] [--dir /tmp] [--keep] [--out RESULTS.md]

Writes val and test splits of --rows each (8 GB on disk at the defaults; reused if --keep left one), then, in a
fresh process, runs the none+ts report with 1000-resample intervals exactly as ``calibview report`` does, with
the default --max-memory (2G, so both splits are streamed). It prints the time of each phase, the peak resident
memory (VmHWM), the longest time between two looks at the cancel event (which bounds how long a cancel waits),
and the time a cancel actually took, set 10 s into the run; and, in another fresh process, the floor: bare h5py
reads of both splits chunk by chunk plus one float64 log-softmax of the evaluation split per calibrator and 10
over the fit split (the log-softmax time measured on the chunks as they are read), with the allocator settings
the report runs with (calibview.core.io.heap.tune_allocator). With ``--out`` it replaces its section (between
``<!-- bench_scale -->`` and ``<!-- /bench_scale -->``) of that markdown file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, threading, time
from calibview.startup import configure_openmp
configure_openmp()              # as the CLI's main() does, before torch loads
from calibview.core.errors import Cancelled
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.heap import tune_allocator

tune_allocator()                # as the CLI's main() does

def hwm():
    return [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0]

path, mode = sys.argv[1], sys.argv[2]
base = hwm()
req = EvalRequest(file=path, run='synthetic/bench', calibrators=('none', 'ts'), n_boot=1000)
stamps = []
checks = []
last = ['start']

class Probe(threading.Event):
    # a cancel event that records when the evaluation looks at it: the gaps bound the cancel latency
    def is_set(self):
        checks.append((time.perf_counter(), last[0]))
        return super().is_set()

cancel = Probe()
def progress(f, m):
    stamps.append((time.perf_counter(), m))
    last[0] = m.split(' ')[0] if not m.startswith('temperature') else 'temperature scaling'

t0 = time.perf_counter()
if mode == 'cancel':
    threading.Timer(10.0, cancel.set).start()
    try:
        evaluate(req, progress=progress, cancel=cancel)
        print(json.dumps({'cancelled': False}))
    except Cancelled:
        print(json.dumps({'cancelled': True, 'after_s': time.perf_counter() - t0 - 10.0,
                          'phase': stamps[-1][1] if stamps else ''}))
    sys.exit(0)
ev = evaluate(req, progress=progress, cancel=cancel)
gaps = {}
for (t_prev, _), (t, phase) in zip(checks, checks[1:]):
    gaps[phase] = max(gaps.get(phase, 0.0), t - t_prev)
r = {r.name: {k: r.metrics[k].value for k in ('accuracy', 'ece', 'nll', 'smece')} for r in ev.results}
print(json.dumps({'elapsed_s': ev.elapsed_s, 'timings': dict(ev.timings), 'base': base, 'peak': hwm(),
                  'gaps': gaps, 'reports': len(stamps), 'checks': len(checks), 'results': r,
                  'temperature': ev.result('ts').fitted.params['temperature']}))
"""


FLOOR = r"""
import json, sys, time
from calibview.startup import configure_openmp
configure_openmp()
from calibview.core.io.heap import tune_allocator
tune_allocator()                # like for like: the report runs with these allocator settings
import h5py, numpy as np, torch
from calibview.core.stats.metrics import chunk_rows
path = sys.argv[1]
out = {}
with h5py.File(path, 'r') as f:
    for split in ('val', 'test'):
        ds = f[f'/synthetic/bench/{split}/logits']
        n, k = ds.shape
        rows = chunk_rows(k)
        buf = np.empty((rows, k), np.float16)
        t_read = t_ls = 0.0
        for a in range(0, n, rows):
            b = min(n, a + rows)
            t = time.perf_counter()
            ds.read_direct(buf, np.s_[a:b], np.s_[0:b - a])
            z = torch.from_numpy(buf[:b - a]).float()   # torch widens float16 fastest (as the report's reader)
            t_read += time.perf_counter() - t
            t = time.perf_counter()
            torch.log_softmax(z.double(), 1)
            t_ls += time.perf_counter() - t
        out[split] = {'read_s': t_read, 'log_softmax_s': t_ls}
print(json.dumps(out))
"""

BEGIN, END = "<!-- bench_scale -->", "<!-- /bench_scale -->"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sections.py beside this script
from sections import write_section  # noqa: E402




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the file for the next run")
    ap.add_argument("--out", default=None, help="markdown file whose bench_scale section is replaced")
    a = ap.parse_args(argv)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    load0 = os.getloadavg()[0]
    path = os.path.join(a.dir, f"calibview-scale-{a.rows}x{a.classes}-f16.h5")
    if not os.path.exists(path):
        sys.path.insert(0, HERE)
        import synthetic
        t = time.perf_counter()
        synthetic.write(path, {"val": a.rows, "test": a.rows}, a.classes, "float16", seed=3)
        print(f"wrote {path} ({os.path.getsize(path) / 1e9:.1f} GB) in {time.perf_counter() - t:.0f} s")
    logits = a.rows * a.classes * 2
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, path, "report"], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr)
            return 1
        r = json.loads(out.stdout.splitlines()[-1])
        print(f"none+ts report, 1000 resamples, {a.rows:,} x {a.classes:,} float16 per split "
              f"({logits / 1e9:.1f} GB each on disk), val and test streamed:")
        print(f"  total {r['elapsed_s']:.0f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["timings"].items()))
        print(f"  peak memory (VmHWM) {r['peak'] / 1e9:.2f} GB; {r['base'] / 1e9:.2f} GB after imports, so "
              f"{(r['peak'] - r['base']) / 1e9:.2f} GB for the report")
        print(f"  {r['reports']} progress reports, {r['checks']} cancel checks; longest time between two cancel "
              "checks, by the phase the last progress report named: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in r["gaps"].items()))
        print(f"  T = {r['temperature']:.4f}; " + "; ".join(
            f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()) for name, m in r["results"].items()))
        out = subprocess.run([sys.executable, "-c", CHILD, path, "cancel"], capture_output=True, text=True)
        c = json.loads(out.stdout.splitlines()[-1])
        cancel_text = (f"stopped {c.get('after_s', float('nan')):.2f} s after the cancel, during "
                       f"'{c.get('phase', '')}'" if c["cancelled"] else "the run finished first")
        print(f"  cancel set 10 s into a run: {cancel_text}")
        out = subprocess.run([sys.executable, "-c", FLOOR, path], capture_output=True, text=True, check=True)
        fl = json.loads(out.stdout.splitlines()[-1])
        passes = 2 + 10                 # one log-softmax per calibrator (none, ts) + 10 over the fit split
        floor = fl["val"]["read_s"] + fl["test"]["read_s"] + passes * fl["test"]["log_softmax_s"]
        ratio = r["elapsed_s"] / floor
        report_mb = (r["peak"] - r["base"]) / 1e6
        print(f"  floor {floor:.1f} s (reads {fl['val']['read_s']:.1f} + {fl['test']['read_s']:.1f} s, "
              f"{passes} log-softmax passes of {fl['test']['log_softmax_s']:.1f} s): {ratio:.2f}x")
        if a.out:
            import torch
            machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
                       f"{torch.__version__} ({torch.get_num_threads()} threads)")
            from calibview.core.stats.metrics import chunk_rows
            rows = chunk_rows(a.classes)
            chunks = -(-a.rows // rows)
            cancel_ok = c["cancelled"] and c["after_s"] < 1.0
            worst_phase, worst_gap = max(r["gaps"].items(), key=lambda kv: kv[1])
            text = "\n".join([
                BEGIN, f"## A split larger than memory: `python benchmarks/bench_scale.py`", "",
                f"Written by `benchmarks/bench_scale.py` on {started}; {machine}; load average {load0:.2f} at the "
                f"start, {os.getloadavg()[0]:.2f} at the end. {a.rows:,} x {a.classes:,} float16 per split "
                f"({logits / 1e9:.1f} GB each), val and test streamed from disk; none+ts, 1000 resamples, in a "
                "fresh process. Every figure is measured in this run.", "",
                "| measurement | measured | target | holds |", "|---|---|---|---|",
                f"| report time against its floor | {r['elapsed_s']:.1f} s vs {floor:.1f} s: {ratio:.2f}x | "
                f"<= 2x | {'yes' if ratio <= 2 else '**no**'} |",
                f"| peak memory (VmHWM) above the imports | {report_mb:,.0f} MB ({r['peak'] / 1e9:.2f} GB in all) | "
                f"< 1.5 GB | {'yes' if r['peak'] - r['base'] < 1.5e9 else '**no**'} |",
                f"| cancel set 10 s into a run | {cancel_text} | within 1 s | {'yes' if cancel_ok else '**no**'} |",
                f"| longest time between two cancel checks (a cancel at the worst moment waits this long) | "
                f"{worst_gap:.2f} s, during '{worst_phase}' | within 1 s | {'yes' if worst_gap < 1.0 else '**no**'} |",
                f"| progress | {r['reports']} progress reports, {r['checks']} cancel checks, for "
                f"{chunks:,} chunks of {rows:,} rows per split | at least one report per chunk | "
                f"{'yes' if r['reports'] >= chunks else '**no**'} |", "",
                "Phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["timings"].items()) + ". The floor: bare "
                f"h5py reads of val ({fl['val']['read_s']:.1f} s) and test ({fl['test']['read_s']:.1f} s) chunk "
                f"by chunk into float32, plus {passes} float64 log-softmax passes of the test split "
                f"({fl['test']['log_softmax_s']:.1f} s each, measured on the chunks as they were read): one per "
                "calibrator and 10 over the fit split, without reading it again. Longest time between two cancel "
                "checks, by phase: " + ", ".join(f"{k} {v:.2f} s" for k, v in r["gaps"].items()) + ".",
                END, ""])
            write_section(a.out, text, BEGIN, END)
            print(f"wrote the bench_scale section of {a.out}")
    finally:
        if not a.keep:
            os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
