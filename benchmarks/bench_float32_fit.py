"""Matrix scaling with float32 objective evaluations, then float64: measured against calibview's float64 fit,
and written into RESULTS.md by this script.

    python benchmarks/bench_float32_fit.py [--out benchmarks/RESULTS.md] [--quick]

Why: run.py's "matrix scaling, per iteration" row compares calibview's float64 objective and gradient with torch
autograd in float32, and a float64 matrix product cannot beat a float32 one. The alternative is a fit that takes
its first L-BFGS iterations on float32 evaluations and finishes in float64, kept only if its fitted parameters
agree with the float64 fit's to 1e-9. This script measures that alternative (it is not in calibview): per
evaluation, float64 (calibview's ``scaling_fit.Objective``), float32 (its ``_accumulate`` on float32 features, each
chunk's sums added up in float64) and torch autograd in float32 (run.py's peer); then the whole fit both
ways, and the largest difference of the fitted (W, b) in their canonical form. For scale it also refits in
float64 from a start moved by one part in a million: how closely L-BFGS's stopping rule pins the parameters at
all. The same synthetic logits as run.py (the ``val`` split of ``synthetic.write(..., seed=1)``), the ODIR penalty
with lam = mu = 1e-3 as run.py's row, the start at temperature scaling as calibview's fit.

Writes the section between ``<!-- bench_float32_fit -->`` and ``<!-- /bench_float32_fit -->`` of ``--out`` (only
with ``--out``); ``--quick`` runs one tiny size for the tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import synthetic  # noqa: E402
from sections import cpu_name, write_section  # noqa: E402

from calibview.core.calibrators.scaling_fit import (Objective, _accumulate, _unpack, canonical,  # noqa: E402
                                                    minimise)
from calibview.core.calibrators.temperature import fit_temperature  # noqa: E402
from calibview.core.io.stream import tune_allocator  # noqa: E402

BEGIN, END = "<!-- bench_float32_fit -->", "<!-- /bench_float32_fit -->"
SIZES = ((10_000, 10), (50_000, 100))
QUICK = ((2_000, 5),)
LAM = 1e-3
AGREE = 1e-9


class Float32Objective(Objective):
    """calibview's matrix-scaling objective with the NLL and its gradient evaluated on float32 features: each
    chunk through calibview's own ``scaling_fit._accumulate`` in float32, its sums added up in float64."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.u32 = self.u.float()

    def nll_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        a_par, b = _unpack(theta, self.k, True)
        a32, b32 = a_par.float(), b.float()
        g_a = torch.zeros((self.k, self.k), dtype=torch.float64)
        g_b = torch.zeros(self.k, dtype=torch.float64)
        total = 0.0
        for s in range(0, self.n, self.rows):
            t32, ga32, gb32 = (torch.zeros(shape, dtype=torch.float32) for shape in ((), (self.k, self.k), self.k))
            _accumulate(True, a32, b32, self.u32[s:s + self.rows], self.y[s:s + self.rows, None], t32, ga32, gb32)
            total += float(t32)
            g_a += ga32.double()
            g_b += gb32.double()
        return total / self.n, torch.cat([g_a.reshape(-1), g_b]) / self.n


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def one_size(n: int, k: int, tmp: str, repeats: int) -> list[str]:
    path = synthetic.write(os.path.join(tmp, f"f32-{n}-{k}.h5"), {"val": n}, k, "float32", seed=1)
    with h5py.File(path, "r") as f:
        z32 = torch.from_numpy(f["synthetic/bench/val/logits"][...])
        y = torch.from_numpy(f["synthetic/bench/val/labels"][...].astype(np.int64))
    x = z32.double()
    o64 = Objective(x, y, True, "odir", LAM, LAM)
    o32 = Float32Objective(x, y, True, "odir", LAM, LAM)
    temperature = fit_temperature(z32, y)[0]
    eye = torch.eye(k, dtype=torch.float64) / temperature
    theta0 = o64.from_model(eye, torch.zeros(k, dtype=torch.float64))
    lin = torch.nn.Linear(k, k)

    def autograd():
        lin.zero_grad()
        torch.nn.functional.cross_entropy(lin(z32), y).backward()
    t64, t32, t_ag = (median_ms(fn, repeats) for fn in (lambda: o64(theta0), lambda: o32(theta0), autograd))

    minimise(o32, theta0, max_iter=2, rel_tol=1e-10, what="ms")          # warm-up (the optimiser's first call)
    t = time.perf_counter()
    th64, i64 = minimise(o64, theta0, max_iter=500, rel_tol=1e-10, what="ms")
    fit64 = time.perf_counter() - t
    t = time.perf_counter()
    th32, i32 = minimise(o32, theta0, max_iter=500, rel_tol=1e-7, what="ms")
    thm, im = minimise(o64, th32, max_iter=500, rel_tol=1e-10, what="ms")
    fitm = time.perf_counter() - t
    thp, ip = minimise(o64, theta0 * (1 + 1e-6), max_iter=500, rel_tol=1e-10, what="ms")

    def model(theta):
        return canonical(*o64.to_model(theta), "odir")
    (w1, b1), (w2, b2), (w3, b3) = model(th64), model(thm), model(thp)
    diff = max(float((w1 - w2).abs().max()), float((b1 - b2).abs().max()))
    diff_p = max(float((w1 - w3).abs().max()), float((b1 - b3).abs().max()))
    size = f"{n:,} x {k:,}"
    return [
        f"| {size} | one objective + gradient evaluation | float64 (calibview) {t64:.2f} ms; float32 {t32:.2f} ms; "
        f"torch autograd float32 {t_ag:.2f} ms | float64 {t_ag / t64:.2f}x, float32 {t_ag / t32:.2f}x the peer's "
        f"speed |",
        f"| {size} | the fit: float64 L-BFGS (calibview) | {fit64:.2f} s, {i64['iterations']} iterations, objective "
        f"{i64['objective']:.15g} | |",
        f"| {size} | the fit: float32 L-BFGS (stop at 1e-7), then float64 (stop at 1e-10) | {fitm:.2f} s, "
        f"{i32['iterations']} + {im['iterations']} iterations, objective {im['objective']:.15g} "
        f"({im['objective'] - i64['objective']:+.1e}) | |",
        f"| {size} | largest difference of the fitted (W, b) from the float64 fit's | {diff:.1e} | "
        + ("within 1e-9: the float32 start could be kept |" if diff <= AGREE else
          "more than 1e-9: the float32 start is not kept |"),
        f"| {size} | for scale: float64 refitted from a start moved by 1e-6 | largest difference {diff_p:.1e}, "
        f"objective {ip['objective'] - i64['objective']:+.1e} | |",
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the section into this Markdown file (RESULTS.md)")
    ap.add_argument("--quick", action="store_true", help="one tiny size, one repeat (for the tests)")
    a = ap.parse_args(argv)
    tune_allocator()
    torch.set_num_threads(os.cpu_count() or 1)
    sizes, repeats = (QUICK, 1) if a.quick else (SIZES, 5)
    started = time.perf_counter()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in sizes:
            rows += one_size(n, k, tmp, repeats)
            print("\n".join(rows[-5:]), flush=True)
    head = (f"Written by `benchmarks/bench_float32_fit.py{' --quick' if a.quick else ''}` on "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {time.perf_counter() - started:.0f} s; "
            f"{os.cpu_count()} CPUs ({cpu_name()}), Python {platform.python_version()}, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads); evaluations: medians of {repeats} after a warm-up.")
    text = "\n".join([
        BEGIN, "## Matrix scaling in float32, then float64: `python benchmarks/bench_float32_fit.py`", "", head, "",
        "What run.py's matrix-scaling row would need (see the script's docstring): a float32 evaluation beats the "
        "float32 peer, but the fit that starts in float32 is kept only if its parameters agree with the float64 "
        "fit's to 1e-9. calibview fits in float64 throughout.", "",
        "| size | measurement | measured | verdict |", "|---|---|---|---|", *rows, END, ""])
    if a.out:
        write_section(a.out, text, BEGIN, END)
        print(f"wrote the bench_float32_fit section of {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
