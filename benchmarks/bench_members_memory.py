"""Peak memory of a members evaluation through the command line: a 10-member run of 10,000 x 100 float32 logits
per split (members as (M, N, K) in an HDF5 file, one chunk per member and split), ``calibview metrics FILE --json
--fit-split val --eval-split test --calibrators none,ts --members all`` in a child process, its peak resident size
(its VmHWM, read as it exits) above the peak of a child that only imported every module that command had
imported by its exit (calibview's lazily loaded modules, torch, scipy, h5py: code and libraries, not data) and ran
one tiny torch operation (the thread pool), against the target of 1.5x
one member's float32 logits of both splits (2 x N x K x 4 bytes). Members are read member by member in chunks of
rows, so the ensemble costs O(N x K), never O(M x N x K) (docs/FORMAT.md). The peak above a bare ``import
calibview`` is printed beside it, and, for scale, the same command on a plain run of member 0's logits (the
engine's own working set for one (N, K) prediction, without members). Not the child's ru_maxrss (wait4, getrusage): Linux folds into it the
resident size of the forked copy of this process before exec, which made a bare ``import calibview`` read 75 MB
here instead of 11 MB. With ``--markdown FILE`` it writes its section (between ``<!--
bench_members_memory -->`` and ``<!-- /bench_members_memory -->``) of that file; otherwise it only prints.

    python benchmarks/bench_members_memory.py [--members 10 --rows 10000 --classes 100 --n-boot 0]
                                              [--markdown benchmarks/RESULTS.md]

Memory, not time: it may run on a loaded machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN, END = "<!-- bench_members_memory -->", "<!-- /bench_members_memory -->"
sys.path.insert(0, HERE)   # sections.py beside this script
from sections import write_section  # noqa: E402
TARGET = 1.5

def write_run(path: str, members: int, rows: int, classes: int, seed: int = 0) -> None:
    """/ens/bench/{val,test}/members (M, N, K) float32, chunked one member at a time, with labels; members that
    share a signal and disagree by a per-sample amount; /plain/bench/{val,test}/logits: member 0 as a plain run."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            y = rng.integers(0, classes, rows)
            base = rng.standard_normal((rows, classes), dtype=np.float32)
            base[np.arange(rows), y] += 2.0
            spread = rng.choice(np.float32([0.3, 1.0, 2.5]), rows)[:, None]
            g = f.create_group(f"ens/bench/{split}")
            ds = g.create_dataset("members", shape=(members, rows, classes), dtype="f4",
                                  chunks=(1, rows, classes))
            for m in range(members):          # one member at a time: the writer never holds M x N x K
                z = base + spread * rng.standard_normal((rows, classes), dtype=np.float32)
                ds[m] = z
                if m == 0:
                    p = f.create_group(f"plain/bench/{split}")
                    p.create_dataset("logits", data=z)
                    p.create_dataset("labels", data=y)
            ds.attrs["kind"] = "ensemble"
            g.create_dataset("labels", data=y)


#: runs ``python -m calibview ARGS`` (or the code ``-c CODE``) and writes its VmHWM (kB) to HWM_FILE at exit:
#: python WRAP HWM_FILE (-m ARGS... | -c CODE)
WRAP = r"""
import atexit, json, re, runpy, sys
hwm_file, mode, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
def _hwm():
    with open(hwm_file, "w") as f:
        f.write(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1))
    with open(hwm_file + ".modules", "w") as f:
        json.dump(sorted(m for m, mod in list(sys.modules.items()) if mod is not None and m != "__main__"), f)
atexit.register(_hwm)
if mode == "-c":
    exec(compile(rest[0], "<imports>", "exec"))
else:
    sys.argv = ["calibview"] + rest
    runpy.run_module("calibview", run_name="__main__", alter_sys=True)
"""


def peak_of(mode: str, args: list, env: dict) -> tuple[int, str, list]:
    """(peak resident bytes of a child running ``python -m calibview ARGS`` (``mode`` "-m") or the code ``-c
    CODE``, its stdout, the modules it had imported): its VmHWM as it exits."""
    with tempfile.TemporaryDirectory() as tmp:
        hwm = os.path.join(tmp, "hwm")
        out = subprocess.run([sys.executable, "-c", WRAP, hwm, mode, *args], capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"{mode} {' '.join(args[:3])} ... failed ({out.returncode}): {out.stderr[-2000:]}")
        with open(hwm) as f, open(hwm + ".modules") as g:
            return int(f.read()) * 1024, out.stdout, json.load(g)


#: the baseline of a command: every module the command had imported by its exit (torch, scipy, h5py and the
#: modules of calibview it loads lazily: code, not data), then one tiny torch operation on the command's threads
#: (the intra-op pool's stacks and workspaces); what the command holds above this is its data
BASELINE = ("import importlib, json, sys\n"
            "from calibview.startup import configure_openmp; configure_openmp()\n"
            "for m in json.loads(sys.argv[-1]):\n"
            "    try:\n        importlib.import_module(m)\n    except Exception:\n        pass\n"
            "import torch; torch.log_softmax(torch.ones(64, 64, dtype=torch.float64), dim=1).sum()\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--n-boot", type=int, default=0)
    ap.add_argument("--markdown", default=None, metavar="FILE", help="also write this benchmark's section of FILE")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "members.h5")
        write_run(path, args.members, args.rows, args.classes)
        bare, _, _ = peak_of("-c", ["import calibview"], env)
        cmd = ["metrics", path, "--json", "--fit-split", "val", "--eval-split", "test", "--calibrators", "none,ts",
               "--n-boot", str(args.n_boot), "--device", "cpu", "--quiet"]
        peak, out, modules = peak_of("-m", cmd + ["--run", "ens/bench", "--members", "all"], env)
        plain, _, plain_modules = peak_of("-m", cmd + ["--run", "plain/bench"], env)
        imported, _, _ = peak_of("-c", [BASELINE, json.dumps(modules)], env)
        plain_imported, _, _ = peak_of("-c", [BASELINE, json.dumps(plain_modules)], env)
    rows = json.loads(out)
    ens_ts = next(r for r in rows if r["member"] == "ensemble" and r["calibrator"] == "ts")
    one_member = 2 * args.rows * args.classes * 4              # one member's float32 logits, val and test
    ratio = (peak - imported) / one_member
    verdict = "yes" if ratio <= TARGET else "**no**"
    size = f"{args.members} x {args.rows:,} x {args.classes} float32, val and test"
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    print(f"members run: {size} ({args.members * one_member / 1e6:.0f} MB of member logits on disk); "
          f"{len(rows)} rows of metrics --json --members all, ensemble ts ECE {ens_ts['ece']:.4f}")
    print(f"peak RSS: metrics {peak / 1e6:.0f} MB; a process that only imported its modules {imported / 1e6:.0f} MB; "
          f"bare `import calibview` {bare / 1e6:.0f} MB")
    print(f"above the imports: {(peak - imported) / 1e6:.1f} MB = {ratio:.2f}x one member's float32 logits of both "
          f"splits ({one_member / 1e6:.0f} MB); above bare import calibview: {(peak - bare) / 1e6:.0f} MB = "
          f"{(peak - bare) / one_member:.1f}x")
    print(f"for scale, a plain run of member 0's logits, same command: {(plain - plain_imported) / 1e6:.1f} MB above "
          f"its imports = {(plain - plain_imported) / one_member:.2f}x")
    print(f"within {TARGET:g}x: {verdict}")
    if args.markdown:
        text = (f"{BEGIN}\n## Members run through the CLI: peak memory (bench_members_memory.py, {when})\n\n"
                f"| members run | command | peak above the imports | target | holds |\n|---|---|---|---|---|\n"
                f"| {size} | metrics --members all, none, ts, {args.n_boot} resamples | "
                f"{(peak - imported) / 1e6:.1f} MB = {ratio:.2f}x one member's logits ({one_member / 1e6:.0f} MB; "
                f"imports {imported / 1e6:.0f} MB; a plain run of member 0: {(plain - plain_imported) / one_member:.2f}x) | "
                f"<= {TARGET:g}x | {verdict} |\n{END}\n")
        write_section(args.markdown, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
