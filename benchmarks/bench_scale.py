"""A split larger than memory: a 2,000,000 x 1,000 float16 file streamed from disk (time, peak memory, cancel).

    python benchmarks/bench_scale.py [--rows 2000000] [--classes 1000] [--dir /tmp] [--keep]

Writes val and test splits of --rows each (8 GB on disk at the defaults; reused if --keep left one), then, in a
fresh process, runs the none+ts report with 1000-resample intervals exactly as ``calibview report`` does, with
the default --max-memory (2G, so both splits are streamed). It prints the time of each phase, the peak resident
memory (VmHWM), the longest time between two looks at the cancel event (which bounds how long a cancel waits),
and the time a cancel actually took, set 10 s into the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, threading, time
from calibview.core.errors import Cancelled
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.stream import tune_allocator

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the file for the next run")
    a = ap.parse_args(argv)
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
        print(f"  cancel set 10 s into a run: stopped {c.get('after_s', float('nan')):.2f} s later, during "
              f"'{c.get('phase', '')}'" if c["cancelled"] else "  cancel: the run finished first")
    finally:
        if not a.keep:
            os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
