"""calibview against the libraries a user would otherwise reach for: one table, every row measured in this run.

    python benchmarks/run.py --markdown benchmarks/RESULTS.md   # all five sizes (more than 83 minutes on 2 cores)
    python benchmarks/run.py --sizes 50000x1000    # one size
    python benchmarks/run.py --quick               # tiny sizes, one repeat: checks that the suite still runs

Each row times calibview and its peer on the same synthetic logits (informative and over-confident, written to
a temporary HDF5 file), the median of --repeats runs after a warm-up; a peer slower than --slow seconds is timed
once, and the table says so. ``ratio`` is peer time / calibview time (above 1: calibview is faster); ``agree``
compares the values. Nothing is asserted: the machines are shared and noisy, so read the ratios, which are
measured side by side. Nothing is extrapolated: the whole-report rows run the peers for real, once for the point
estimates at every size, and with every resample recomputed by the peers at ``--resample-size`` (2,000 x 10 by
default, where the dense CAL/TOT peer is cheap). ``--markdown FILE`` replaces the section between
``<!-- run.py -->`` and ``<!-- /run.py -->`` (the whole file if it has no markers), including the targets
computed from the rows. Peers: torchmetrics, netcal, relplot 1.0.3, scikit-learn, sharpcal 0.0.2 (its
TemperatureScaler; its dense calibration-sharpness estimator needs the ``datasets`` package, so that formula,
NW regression at the data points, is re-implemented here in float32 torch as sharpcal computes it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synthetic  # noqa: E402

from calibview.core import calibrators as calib  # noqa: E402
from calibview.core.calibrators import binning as cb  # noqa: E402
from calibview.core.calibrators import scaling as cs  # noqa: E402
from calibview.core.calibrators import scaling_fit  # noqa: E402
from calibview.core.calibrators.temperature import forget_last_fit  # noqa: E402
from calibview.core.stats import smooth_ece, smoothing  # noqa: E402
from calibview.core.evaluation.engine import evaluate  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.io.logits import read_split  # noqa: E402
from calibview.core.stats.metrics import chunk_rows, top_label, top_label_ece  # noqa: E402
from calibview.core.io.stream import tune_allocator  # noqa: E402

SIZES = ((10_000, 10), (50_000, 100), (50_000, 1000), (1_000_000, 10), (10_000, 21_841))
QUICK = ((3000, 10), (2000, 300))
RUN = "synthetic/bench"


@dataclass
class Row:
    size: str
    task: str
    ours: float | None          # seconds
    peer: str
    peer_s: float | None
    agree: str = ""
    note: str = ""
    #: what the summary reads: {"metric": ..., "agree_value": ..., ...}
    meta: dict = field(default_factory=dict)

    def cells(self) -> list[str]:
        ratio = f"{self.peer_s / self.ours:.1f}x" if self.ours and self.peer_s else ""
        return [self.size, self.task, ms(self.ours), self.peer, ms(self.peer_s), ratio, self.agree, self.note]


HEAD = ["size", "task", "calibview", "peer", "peer time", "ratio", "agree", "note"]


def ms(t: float | None) -> str:
    if t is None:
        return ""
    return f"{t * 1e3:.2f} ms" if t < 0.01 else f"{t * 1e3:.0f} ms" if t < 10 else f"{t:.1f} s"


class Timer:
    def __init__(self, repeats: int, slow: float) -> None:
        self.repeats, self.slow = repeats, slow

    def __call__(self, fn, warm: bool = True):
        """(median seconds, last result, runs): a warm-up, then up to ``repeats`` runs (one if it is slow)."""
        if warm:
            t = time.perf_counter()
            out = fn()
            if time.perf_counter() - t > self.slow:
                return time.perf_counter() - t, out, 1
        times = []
        for _ in range(self.repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
            if times[-1] > self.slow:
                break
        return statistics.median(times), out, len(times)


def once(runs: int, repeats: int) -> str:
    return "" if runs >= repeats else f"{runs} run" + ("s" if runs > 1 else "") + " (slow)"


# ----------------------------------------------------------------------------------------------------- peers

def peer_ece_torchmetrics(z, y, k, bins=15, norm="l1"):
    from torchmetrics.functional.classification import multiclass_calibration_error
    return float(multiclass_calibration_error(z, y, num_classes=k, n_bins=bins, norm=norm))


def peer_ece_netcal(z, y, bins=15):
    from netcal.metrics import ECE
    p = torch.softmax(z, 1).numpy()
    return float(ECE(bins=bins).measure(p, y.numpy()))


def peer_dense_diagram(conf, correct, brier, h=0.05, grid=200, rows=2048):
    """sharpcal's dense estimator: Gaussian NW regression of correctness on confidence evaluated at every data
    point (CAL = mean (c_hat(conf_i) - conf_i)^2), TOT = mean Brier, and the curve on ``grid`` points; float32
    torch as sharpcal computes it, in row blocks so the N x N kernel matrix never exists."""
    c = torch.from_numpy(conf).float()
    a = torch.from_numpy(correct).float()
    norm = 1.0 / (h * (2 * np.pi) ** 0.5)

    def nw(x):
        out = torch.empty_like(x)
        for s in range(0, x.numel(), rows):
            w = torch.exp(-(x[s:s + rows, None] - c[None, :]) ** 2 / (2 * h * h)) * norm
            out[s:s + rows] = (w * a).mean(1) / w.mean(1)
        return out
    reg = nw(c)
    cal = float(((reg - c) ** 2).mean())
    nw(torch.linspace(0, 1, grid))
    return cal, float(np.mean(brier))


#: the peer's L-BFGS run to convergence (float64, strong-Wolfe line search), so its speed is compared at the
#: same optimum as calibview's (its NLL is checked against calibview's in the table)
LBFGS = dict(lr=1.0, max_iter=1000, history_size=20, line_search_fn="strong_wolfe", tolerance_grad=1e-12,
             tolerance_change=1e-15)
LBFGS_TEXT = ("torch LBFGS to convergence (float64, strong_wolfe, tolerance_grad 1e-12, tolerance_change 1e-15, "
              "max_iter 1000)")


def peer_lbfgs(z, y, model="temperature"):
    """torch.optim.LBFGS on the cross-entropy, run to convergence (``LBFGS``); returns (params, iterations)."""
    k = z.shape[1]
    z = z.double()
    if model == "temperature":
        params = [torch.nn.Parameter(torch.ones(1, dtype=torch.float64))]
        fwd = lambda: z / params[0]                                        # noqa: E731
    else:
        params = [torch.nn.Parameter(torch.ones(k, dtype=torch.float64)),
                  torch.nn.Parameter(torch.zeros(k, dtype=torch.float64))]
        fwd = lambda: z * params[0] + params[1]                            # noqa: E731
    opt = torch.optim.LBFGS(params, **LBFGS)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(fwd(), y)
        loss.backward()
        return loss
    opt.step(closure)
    return [p.detach() for p in params], int(opt.state[opt._params[0]]["n_iter"])


def peer_sharpcal_ts(z, y):
    from sharpcal.recal import TemperatureScaler
    ts = TemperatureScaler(init_T=1.5)
    ts.fit(z, y)
    return float(ts.T.detach())


def quiet():
    """netcal prints a line per class absent from the fit split (21,000 lines at K = 21,841)."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(open(os.devnull, "w")))
    return stack


def peer_hb(p_fit, y_fit, p_eval, bins=15):
    from netcal.binning import HistogramBinning
    hb = HistogramBinning(bins=bins, independent_probabilities=True)
    with quiet():
        hb.fit(p_fit, y_fit)
        return hb.transform(p_eval)


def peer_ir_sklearn(p_fit, y_fit, p_eval):
    from sklearn.isotonic import IsotonicRegression
    out = np.empty_like(p_eval)
    for c in range(p_fit.shape[1]):
        ir = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)
        ir.fit(p_fit[:, c], (y_fit == c).astype(np.float64))
        out[:, c] = ir.predict(p_eval[:, c])
    return out


def peer_ir_netcal(p_fit, y_fit, p_eval):
    from netcal.binning import IsotonicRegression
    ir = IsotonicRegression(independent_probabilities=True)
    with quiet():
        ir.fit(p_fit, y_fit)
        return ir.transform(p_eval)


def peer_metric_pass(p, z, y, k, dense=True):
    """One evaluation of every metric by the peers: what each of the 1000 resamples would cost them."""
    import relplot
    from netcal.metrics import ACE
    from sklearn.metrics import log_loss
    conf, pred = p.max(1)
    correct = (pred == y).double().numpy()
    peer_ece_torchmetrics(z, y, k)
    peer_ece_torchmetrics(z, y, k, norm="max")
    peer_ece_torchmetrics(z, y, k, norm="l2")
    ACE(bins=15).measure(p.numpy(), y.numpy())
    log_loss(y.numpy(), p.numpy(), labels=np.arange(k))
    onehot = np.zeros(p.shape)
    onehot[np.arange(len(y)), y.numpy()] = 1
    brier = ((p.numpy() - onehot) ** 2).sum(1)
    relplot.smECE(conf.numpy(), correct)
    if dense and len(y) <= 50_000:
        peer_dense_diagram(conf.double().numpy(), correct, brier)


PEER_REPORT = ("peers: h5py read of val and test; TS and VS by the converged torch LBFGS, netcal HistogramBinning, "
               "sklearn IsotonicRegression per class; per calibrator torchmetrics ECE/MCE/RMSCE, netcal ACE, sklearn "
               "log_loss, numpy Brier, relplot smECE and (N <= 50,000) the dense CAL/TOT")


def peer_report(path: str, cals, n_boot: int, seed: int = 0) -> None:
    """What a user assembles from the peers for calibview's report, really run: read, fit, apply, then one metric
    pass per calibrator on the test split and, for intervals, ``n_boot`` multinomial resamples of the test rows
    (numpy), each recomputing every metric with the peers."""
    with h5py.File(path, "r") as f:
        zv, yv = torch.from_numpy(f[f"/{RUN}/val/logits"][...]), torch.from_numpy(f[f"/{RUN}/val/labels"][...])
        z, y = torch.from_numpy(f[f"/{RUN}/test/logits"][...]), torch.from_numpy(f[f"/{RUN}/test/labels"][...])
    k = z.shape[1]
    p_fit, p_eval = torch.softmax(zv.double(), 1).numpy(), torch.softmax(z.double(), 1)
    probs = {}
    for name in cals:
        if name == "none":
            probs[name] = p_eval
        elif name == "ts":
            (t,), _ = peer_lbfgs(zv, yv)
            probs[name] = torch.softmax(z.double() / t, 1)
        elif name == "vs":
            (w, b), _ = peer_lbfgs(zv, yv, "vector")
            probs[name] = torch.softmax(z.double() * w + b, 1)
        else:
            q = (peer_hb if name == "hb" else peer_ir_sklearn)(p_fit, yv.numpy(), p_eval.numpy())
            q = np.clip(np.nan_to_num(q), 0, None) + 1e-12
            probs[name] = torch.from_numpy(q / q.sum(1, keepdims=True))
    for p in probs.values():
        peer_metric_pass(p, p, y, k)
    rng = np.random.default_rng(seed)
    n = len(y)
    for _ in range(n_boot):
        idx = torch.from_numpy(np.repeat(np.arange(n), rng.multinomial(n, np.full(n, 1.0 / n))))
        for p in probs.values():
            peer_metric_pass(p[idx], p[idx], y[idx], k)


def resample_rows(rows: list[Row], print_row, tmp: str, timer: Timer, n: int, k: int, n_boot: int) -> None:
    """calibview's report with ``n_boot``-resample intervals against the peers really resampling (no
    extrapolation), at a size where the peers' loop is feasible."""
    path = os.path.join(tmp, f"resample-{n}-{k}.h5")
    synthetic.write(path, {"val": n, "test": n}, k, "float32", seed=3)
    cals = ("none", "ts", "vs", "hb", "ir")
    req = EvalRequest(file=path, run=RUN, calibrators=cals, n_boot=n_boot)
    t_ours, _, r_ours = timer(lambda: evaluate(req), warm=False)
    peer = Timer(1, timer.slow)
    t_peer, _, _ = peer(lambda: peer_report(path, cals, n_boot), warm=False)
    row = Row(f"{n:,} x {k:,}", f"report {','.join(cals)}, all metrics, {n_boot} resamples", t_ours,
              f"peers: the same, each of {n_boot} multinomial resamples recomputed", t_peer, "",
              f"{PEER_REPORT}; both really run; peer 1 run, ours {once(r_ours, timer.repeats) or 'median'}",
              {"metric": "report_boot"})
    rows.append(row)
    print_row(row)
    os.remove(path)


# ------------------------------------------------------------------------------------------------------ suite

def bench_size(n: int, k: int, tmp: str, timer: Timer, n_boot: int, rows: list[Row], print_row) -> None:
    size = f"{n:,} x {k:,}"
    path = os.path.join(tmp, f"bench-{n}-{k}.h5")
    synthetic.write(path, {"val": n, "test": n}, k, "float32", seed=1)
    R = timer.repeats

    def add(task, ours, peer="", peer_s=None, agree="", note="", meta=None):
        row = Row(size, task, ours, peer, peer_s, agree, note, meta or {})
        rows.append(row)
        print_row(row)

    # Loading: calibview's validated read vs a bare h5py read of the same dataset (the floor).
    def bare():
        with h5py.File(path, "r") as f:
            return f[f"/{RUN}/test/logits"][...]
    t_floor, raw, _ = timer(bare)
    t_read, data, _ = timer(lambda: read_split(path, RUN, "test"))
    add("load a split (validated)", t_read, "bare h5py ds[...] (floor)", t_floor,
        "identical" if np.array_equal(raw, data.scores) else "DIFFERENT")
    z, y = torch.from_numpy(raw), torch.from_numpy(data.labels.copy())
    val = read_split(path, RUN, "val")
    zv, yv = torch.from_numpy(val.scores.copy()), torch.from_numpy(val.labels.copy())

    # Top-label ECE from logits.
    t_ours, e_ours, _ = timer(lambda: top_label_ece(z, y, 15))
    t_tm, e_tm, r_tm = timer(lambda: peer_ece_torchmetrics(z, y, k))
    e_tm64 = peer_ece_torchmetrics(torch.softmax(z.double(), 1), y, k)
    add("top-label ECE from logits (15 bins)", t_ours, "torchmetrics multiclass_calibration_error", t_tm,
        f"|diff| {abs(e_ours - e_tm64):.1e}",
        "torchmetrics bins float32 confidences (also when given float64 probabilities): "
        f"|diff| {abs(e_ours - e_tm):.0e} from the logits" + (", " + once(r_tm, R) if once(r_tm, R) else ""),
        meta={"metric": "ece", "agree_value": abs(e_ours - e_tm64), "float32_peer": True})
    t_nc, e_nc, r_nc = timer(lambda: peer_ece_netcal(z, y))
    add("top-label ECE from logits (15 bins)", t_ours, "netcal ECE (+ softmax)", t_nc,
        f"|diff| {abs(e_ours - e_nc):.1e}", once(r_nc, R), meta={"metric": "ece", "agree_value": abs(e_ours - e_nc)})

    # SmoothECE and the diagram, on the uncalibrated test split.
    conf, correct = top_label(z, y)
    lp = torch.log_softmax(z.double(), 1)
    brier = ((lp.exp() ** 2).sum(1) - 2 * lp.gather(1, y[:, None])[:, 0].exp() + 1).numpy()
    del lp
    import relplot
    t_ours, v_ours, _ = timer(lambda: smooth_ece.smece(conf, correct)[0])
    t_rp, v_rp, r_rp = timer(lambda: relplot.smECE(conf, correct))
    add("SmoothECE", t_ours, "relplot 1.0.3 smECE", t_rp, f"|diff| {abs(v_ours - v_rp):.1e}", once(r_rp, R),
        meta={"metric": "smece", "agree_value": abs(v_ours - v_rp)})

    def ours_diagram():
        stats = smoothing.bin_stats(conf, correct, brier)
        smoothing.sharpness_curve(stats, 0.05)
        return smoothing.cal_tot(conf, correct, brier, 0.05)
    t_ours, (cal, tot), _ = timer(ours_diagram)
    if n <= 50_000:
        t_sc, (cal_p, tot_p), r_sc = timer(lambda: peer_dense_diagram(conf, correct, brier))
        add("diagram: CAL, TOT, curve at h = 0.05", t_ours, "sharpcal dense formula (float32 torch)", t_sc,
            f"|diff| {max(abs(cal - cal_p), abs(tot - tot_p)):.1e}",
            f"CAL {cal:.4e}, TOT {tot:.4f}" + (", " + once(r_sc, R) if once(r_sc, R) else ""),
            meta={"metric": "diagram", "agree_value": max(abs(cal - cal_p), abs(tot - tot_p))})
    else:
        add("diagram: CAL, TOT, curve at h = 0.05", t_ours, "sharpcal dense formula", None, "",
            f"peer not run: O(N^2) = {n * n:.0e} kernel terms")

    # Temperature scaling fit on the val split.
    def fit_ts():
        forget_last_fit()           # each repeat fits: the fit remembers its last split and would return at once
        return calib.fit_temperature(zv, yv)
    t_ours, (temp, passes, _), _ = timer(fit_ts)
    nll = lambda t: float(torch.nn.functional.cross_entropy(zv.double() / t, yv))      # noqa: E731
    t_lb, (lb, lb_iters), r_lb = timer(lambda: peer_lbfgs(zv, yv))
    t_lb_temp = float(lb[0])
    d_nll = nll(t_lb_temp) - nll(temp)
    add("temperature scaling fit", t_ours, LBFGS_TEXT, t_lb,
        f"T {temp:.6f} vs {t_lb_temp:.6f}, NLL diff {d_nll:+.1e}",
        f"peer converged in {lb_iters} iterations; the NLLs agree to 1e-9: {'yes' if abs(d_nll) <= 1e-9 else 'NO'}"
        + (", " + once(r_lb, R) if once(r_lb, R) else ""),
        meta={"metric": "ts", "converged_peer": True, "agree_value": abs(d_nll)})
    try:
        if t_lb > 60:           # sharpcal runs up to 1000 L-BFGS iterations
            raise TimeoutError
        t_sc, sc_temp, r_sc = timer(lambda: peer_sharpcal_ts(zv, yv))
        d_sc = nll(sc_temp) - nll(temp)
        add("temperature scaling fit", t_ours, "sharpcal TemperatureScaler (its defaults)", t_sc,
            f"T {temp:.6f} vs {sc_temp:.6f}, NLL diff {d_sc:+.1e}",
            f"its own stopping rule; converged to 1e-9 in NLL: {'yes' if abs(d_sc) <= 1e-9 else 'no'}"
            + (", " + once(r_sc, R) if once(r_sc, R) else ""))
    except ImportError:
        add("temperature scaling fit", t_ours, "sharpcal TemperatureScaler", None, "", "sharpcal not installed")
    except TimeoutError:
        add("temperature scaling fit", t_ours, "sharpcal TemperatureScaler", None, "",
            f"not run: its L-BFGS takes up to 1000 iterations, the converged torch LBFGS took {ms(t_lb)}")

    # Vector and matrix scaling: one objective + gradient evaluation (an L-BFGS iteration's cost).
    for matrix, name in ((False, "vector"), (True, "matrix")):
        if matrix and k * k > cs.MAX_MATRIX_PARAMS:
            add(f"{name} scaling, per iteration", None, "", None, "",
                f"refused: K^2 = {k * k:,} parameters > {cs.MAX_MATRIX_PARAMS:,}")
            continue
        x = zv.double()
        obj = scaling_fit.Objective(x, yv, matrix, "odir" if matrix else None, 1e-3, 1e-3)
        eye = torch.eye(k, dtype=torch.float64) if matrix else torch.ones(k, dtype=torch.float64)
        theta = obj.from_model(eye, torch.zeros(k, dtype=torch.float64))
        t_ours, _, _ = timer(lambda: obj(theta))
        lin = torch.nn.Linear(k, k) if matrix else None

        def autograd():
            if matrix:
                lin.zero_grad()
                loss = torch.nn.functional.cross_entropy(lin(zv), yv)
            else:
                w = torch.ones(k, requires_grad=True)
                b = torch.zeros(k, requires_grad=True)
                loss = torch.nn.functional.cross_entropy(zv * w + b, yv)
            loss.backward()
            return float(loss.detach())
        t_ag, _, r_ag = timer(autograd)
        add(f"{name} scaling, per iteration", t_ours, "torch autograd forward+backward (float32)", t_ag, "",
            "ours float64" + (", " + once(r_ag, R) if once(r_ag, R) else ""), meta={"metric": "iteration"})
        obj = x = None          # the next iteration (matrix) needs the memory

    # Histogram binning and isotonic regression: fit on val, apply to test.
    p_fit, p_eval = cb.probabilities(zv).numpy(), cb.probabilities(z).numpy()

    def ours_binning(name):
        fitted = calib.fit(name, zv, yv)
        return cb.one_vs_rest(fitted, z).numpy()
    # classes absent from the fit split (K = 21,841 on 10,000 samples): netcal leaves their columns at 0,
    # calibview maps their empty bins to the bin centres (the binning module's docstring); the agreement is
    # over the classes the fit split has
    present = np.bincount(yv.numpy(), minlength=k) > 0
    absent = "" if present.all() else f"{(~present).sum():,} classes absent from the fit split excluded"
    t_ours, hb_ours, _ = timer(lambda: ours_binning("hb"))
    t_p, hb_peer, r_p = timer(lambda: peer_hb(p_fit, yv.numpy(), p_eval))
    d_hb = float(np.nanmax(np.abs(hb_ours - hb_peer)[:, present]))
    add("histogram binning fit + apply", t_ours, "netcal HistogramBinning", t_p, f"max |diff| {d_hb:.1e}",
        ", ".join(x for x in (absent, once(r_p, R)) if x), meta={"metric": "binning", "agree_value": d_hb})
    t_ours, ir_ours, _ = timer(lambda: ours_binning("ir"))
    t_p, ir_peer, r_p = timer(lambda: peer_ir_sklearn(p_fit, yv.numpy(), p_eval))
    add("isotonic regression fit + apply", t_ours, "sklearn IsotonicRegression per class", t_p,
        f"max |diff| {np.abs(ir_ours - ir_peer).max():.1e}", once(r_p, R),
        meta={"metric": "binning", "agree_value": float(np.abs(ir_ours - ir_peer).max())})
    if k <= 1000:
        t_p, ir_peer, r_p = timer(lambda: peer_ir_netcal(p_fit, yv.numpy(), p_eval))
        add("isotonic regression fit + apply", t_ours, "netcal IsotonicRegression", t_p,
            f"max |diff| {np.abs(ir_ours - ir_peer).max():.1e}", once(r_p, R),
            meta={"metric": "binning", "agree_value": float(np.abs(ir_ours - ir_peer).max())})
    del hb_ours, hb_peer, ir_ours, ir_peer

    # The whole report once (point estimates, no intervals) vs the peers doing the same jobs once.
    cals = ("none", "ts", "vs", "hb", "ir")
    req = EvalRequest(file=path, run=RUN, calibrators=cals, n_boot=0)
    t_ours, ev, r_ours = timer(lambda: evaluate(req))
    t_peer, _, r_peer = timer(lambda: peer_report(path, cals, 0))
    add(f"report {','.join(cals)}, all metrics once, no intervals", t_ours,
        "peers: read, fits, one metric pass per calibrator", t_peer, "",
        ", ".join(x for x in (f"{PEER_REPORT}; ours {once(r_ours, R) or 'median'}", once(r_peer, R)) if x),
        meta={"metric": "report_points"})

    # The none+ts report (every metric, no intervals) against its floor.
    req = EvalRequest(file=path, run=RUN, calibrators=("none", "ts"), n_boot=0)
    t_ours, ev, _ = timer(lambda: evaluate(req))
    rows_per = chunk_rows(k)

    def one_pass():
        for i in range(0, n, rows_per):
            torch.log_softmax(z[i:i + rows_per].double(), 1)
    t_pass, _, _ = timer(one_pass)
    passes = ev.result("ts").fitted.params["passes"]
    # the floor: both reads, one log-softmax of the evaluation split per calibrator and 10 passes over the fit
    # split (of the same size here), whatever the fit itself used
    floor = 2 * t_floor + (len(req.calibrators) + 10) * t_pass
    add("report none,ts, all metrics, no intervals", t_ours,
        f"floor: read 2 splits + {len(req.calibrators) + 10} passes", floor,
        "", f"{t_ours / floor:.1f}x the floor (one log-softmax pass {ms(t_pass)}; TS used {passes})",
        meta={"metric": "floor", "value": t_ours / floor})
    os.remove(path)


def bandwidth_rows(rows: list[Row], print_row, sizes=(1_000_000, 10_000_000)) -> None:
    rng = np.random.default_rng(1)
    for n in sizes:
        c = rng.beta(5, 1, n)
        a = (rng.random(n) < c ** 1.3).astype(float)
        t = time.perf_counter()
        stats = smoothing.bin_stats(c, a, (c - a) ** 2)
        t_bin = time.perf_counter() - t
        times = []
        for h in np.geomspace(0.005, 0.5, 200):
            t = time.perf_counter()
            smoothing.sharpness_curve(stats, float(h))
            times.append(time.perf_counter() - t)
        row = Row(f"{n:,} samples", "bandwidth change (median of 200)", statistics.median(times), "", None, "",
                  f"max {ms(max(times))}; binning once {ms(t_bin)}", {"metric": "bandwidth", "n": n})
        rows.append(row)
        print_row(row)


def memory_row(rows: list[Row], print_row, tmp: str, n=50_000, k=1000) -> None:
    """Peak RSS of a none+ts report (1000 resamples) in a fresh process, above the process's size after imports."""
    path = os.path.join(tmp, "memory.h5")
    synthetic.write(path, {"val": n, "test": n}, k, "float32", seed=2)
    # VmHWM (the process's own high-water mark) rather than ru_maxrss, which a child inherits from its parent
    code = ("import sys; from calibview.startup import configure_openmp; configure_openmp()\n"
            "from calibview.core.evaluation.request import EvalRequest\n"
            "from calibview.core.evaluation.engine import evaluate\n"
            "from calibview.core.io.heap import tune_allocator; tune_allocator()\n"
            "hwm = lambda: [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "base = hwm()\n"
            f"evaluate(EvalRequest(file=sys.argv[1], run='{RUN}', calibrators=('none', 'ts'), n_boot=1000))\n"
            "print(base, hwm())")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    base, peak = (int(v) * 1024 for v in out.stdout.split())
    logits = 2 * n * k * 4
    row = Row(f"{n:,} x {k:,}", "peak memory, report none,ts, 1000 resamples", None,
              "logits of val + test", None, f"{(peak - base) / logits:.2f}x the logits",
              f"{(peak - base) / 1e6:.0f} MB above the {base / 1e6:.0f} MB of a process that imported "
              f"calibview; logits {logits / 1e6:.0f} MB; total peak {peak / 1e6:.0f} MB",
              {"metric": "memory", "value": (peak - base) / logits, "size": f"{n:,} x {k:,}"})
    rows.append(row)
    print_row(row)
    os.remove(path)


def machine() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), {gpu}")


BEGIN, END = "<!-- run.py -->", "<!-- /run.py -->"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sections.py beside this script
from sections import write_section  # noqa: E402
HOW = ("`ratio` is peer time / calibview time (above 1: calibview is faster), each the median of the repeats after a "
       "warm-up unless the note says otherwise. Every peer time is measured in this run: the whole-report rows run "
       "the peers' fits and metric passes for real (the resampled one recomputes every metric with the peers on "
       "each multinomial resample), nothing is extrapolated. The temperature-scaling peer is run to convergence "
       "before its speed is compared (settings in its row; the agree column gives its NLL minus calibview's).")


def _fmt_x(v: float) -> str:
    return f"{v:,.0f}x" if v >= 100 else f"{v:.1f}x"


def summary(rows: list[Row]) -> list[str]:
    """The targets, each computed from the rows measured above (an empty cell: not measured in this run)."""
    out = ["| target | measured in this run | holds? |", "|---|---|---|"]
    by = lambda m: [r for r in rows if r.meta.get("metric") == m]          # noqa: E731
    ratio = lambda r: r.peer_s / r.ours if r.ours and r.peer_s else None   # noqa: E731

    boot = [r for r in by("report_boot") if ratio(r)]
    if boot:
        out.append("| whole report (none, ts, vs, hb, ir; all metrics; bootstrap intervals) at least 10x faster "
                   "than the peers doing the same, every resample really recomputed by the peers | " + "; ".join(
                       f"{r.size}, {r.task.split('resamples')[0].split(', ')[-1]}resamples: {ms(r.ours)} vs "
                       f"{ms(r.peer_s)} = {_fmt_x(ratio(r))}" for r in boot)
                   + f" | {'yes' if all(ratio(r) >= 10 for r in boot) else '**no**'} |")
    pts = [r for r in by("report_points") if ratio(r)]
    if pts:
        out.append("| the same report once, point estimates only (no intervals), against the peers once | "
                   + "; ".join(f"{r.size}: {ms(r.ours)} vs {ms(r.peer_s)} = {_fmt_x(ratio(r))}" for r in pts)
                   + f" | {'faster at every size' if all(ratio(r) >= 1 for r in pts) else '**slower at ' + ', '.join(r.size for r in pts if ratio(r) < 1) + '**'} (no target) |")
    fl = by("floor")
    if fl:
        out.append("| none+ts report (no intervals) within 3x of its floor (reading both splits + one log-softmax "
                   "of the evaluation split per calibrator + 10 passes over the fit split) | " + "; ".join(f"{r.size}: {r.meta['value']:.1f}x" for r in fl)
                   + f" | {'yes' if all(r.meta['value'] <= 3 for r in fl) else '**no**'} |")
    cells, ok = [], True
    for metric, label in (("ece", "top-label ECE"), ("smece", "SmoothECE"), ("diagram", "CAL/TOT diagram"),
                          ("ts", "temperature fit (converged peer)"), ("binning", "binning fit + apply"),
                          ("iteration", "scaling iteration")):
        rs = [r for r in by(metric) if ratio(r)]
        if not rs:
            continue
        sizes = dict.fromkeys(r.size for r in rs)
        worst = min(min(ratio(r) for r in rs if r.size == sz) for sz in sizes)
        agree = [r for r in rs if not r.meta.get("float32_peer")]
        dmax = max((r.meta["agree_value"] for r in agree if "agree_value" in r.meta), default=float("nan"))
        tol = 1e-9 if metric == "ts" else 1e-6
        good = worst >= 1 and (dmax <= tol or metric == "iteration")         # an iteration has no value to agree
        ok &= good
        cells.append(f"{label}: slowest ratio against its fastest peer {_fmt_x(worst)}"
                     + ("" if metric == "iteration" else f", largest difference {dmax:.1e} (tolerance {tol:.0e})")
                     + ("" if good else " **misses**"))
    if cells:
        out.append("| every single-metric and per-iteration row at least as fast as its fastest peer, at every size "
                   "run, values agreeing to 1e-6 (the TS fit's NLL to 1e-9) | " + "; ".join(cells) + " (torchmetrics bins float32 confidences and is "
                   f"left out of the agreement) | {'yes' if ok else '**no**'} |")
    bw = by("bandwidth")
    if bw:
        big = max(bw, key=lambda r: r.meta["n"])
        out.append(f"| a bandwidth change under 2 ms on 10,000,000 samples | " + "; ".join(
            f"{r.meta['n']:,} samples: median {ms(r.ours)} ({r.note})" for r in bw)
            + f" | {'yes' if big.meta['n'] >= 10_000_000 and big.ours < 0.002 else ('**no**' if big.meta['n'] >= 10_000_000 else 'not measured at 10,000,000')} |")
    mem = by("memory")
    if mem:
        r = mem[0]
        out.append(f"| peak memory of a none+ts report at most 1.5x the logits | {r.meta['size']}: "
                   f"{r.meta['value']:.2f}x ({r.note}) | {'yes' if r.meta['value'] <= 1.5 else '**no**'} |")
    out.append("| a 2,000,000 x 1,000 float16 split under 1.5 GB, progress per chunk, cancel within a second | "
               "not measured by run.py (`bench_scale.py` prints it) | |")
    return out


def to_markdown(rows: list[Row], header: str, sizes: str, finished: bool = True) -> str:
    """The RESULTS.md section; ``finished`` False: written after a row of a run still going, which says so (a
    run stopped midway leaves that text, and the sizes it lacks are named)."""
    done = list(dict.fromkeys(r.size for r in rows if " x " in r.size))
    state = ("" if finished else " **This run had not finished when this was written** (rows so far: "
             + (", ".join(done) or "none") + "); a run stopped here lacks the later rows and the targets they "
             "decide.")
    lines = [BEGIN, "## `python benchmarks/run.py`: calibview against its peers", "", header + ".", "",
             f"Sizes run: {sizes}.{state}", "", "### The targets, computed from the rows below", ""]
    lines += summary(rows)
    lines += ["", "### Rows", "", HOW, "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r.cells()) + " |" for r in rows]
    return "\n".join(lines + [END]) + "\n"




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=None,
                    help="comma-separated NxK, e.g. 50000x1000 (default: all five); 'none': only the bandwidth and "
                         "memory rows")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--slow", type=float, default=10.0, help="a run longer than this (s) is not repeated")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one repeat, 50 resamples")
    ap.add_argument("--markdown", default=None, help="also write the table to this Markdown file")
    ap.add_argument("--json", default=None, help="also write the rows as JSON")
    ap.add_argument("--resample-size", default=None,
                    help="NxK of the report against the peers really resampling (default 2000x10; 'none': skip)")
    a = ap.parse_args(argv)
    tune_allocator()                # as the CLI's main() does, so the timings are the CLI's
    if a.quick:
        sizes, a.repeats, a.n_boot = QUICK, 1, 50
    elif a.sizes == "none":             # only the bandwidth and memory rows
        sizes = ()
    elif a.sizes:
        sizes = tuple(tuple(int(float(v)) for v in s.lower().split("x")) for s in a.sizes.split(","))
    else:
        sizes = SIZES
    resample = a.resample_size or ("300x10" if a.quick else "2000x10")
    resample_boot = 10 if a.quick else a.n_boot
    resample = None if resample == "none" else tuple(int(float(v)) for v in resample.lower().split("x"))
    torch.set_num_threads(os.cpu_count() or 1)
    header = (f"Written by `benchmarks/run.py{' --quick' if a.quick else ''}` on {time.strftime('%Y-%m-%d %H:%M')}: "
              f"{machine()}; median of {a.repeats}")
    sizes_text = (", ".join(f"{n:,} x {k:,}" for n, k in sizes) or "none") + (
        f"; the resampled report at {resample[0]:,} x {resample[1]:,} with {resample_boot} resamples" if resample else "")
    print(header)
    widths = [16, 44, 10, 46, 10, 8, 34]
    print("  ".join(h.ljust(w) for h, w in zip(HEAD, widths + [0])))

    rows: list[Row] = []

    def print_row(r: Row) -> None:
        print("  ".join(c.ljust(w) for c, w in zip(r.cells(), widths + [0])), flush=True)
        # after every row: a long run keeps what it measured, marked unfinished until the last save
        save(rows, header, a.markdown, a.json, sizes_text, finished=False)
    timer = Timer(a.repeats, a.slow)
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in sizes:
            bench_size(n, k, tmp, timer, a.n_boot, rows, print_row)
        if resample:
            resample_rows(rows, print_row, tmp, timer, *resample, resample_boot)
        bandwidth_rows(rows, print_row, (20_000, 200_000) if a.quick else (1_000_000, 10_000_000))
        memory_row(rows, print_row, tmp, *((5000, 100) if a.quick else (50_000, 1000)))
    save(rows, header, a.markdown, a.json, sizes_text)
    print(f"peak RSS of this benchmark process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB")
    return 0


def save(rows: list[Row], header: str, markdown: str | None, json_path: str | None, sizes: str = "",
         finished: bool = True) -> None:
    if markdown:
        write_section(markdown, to_markdown(rows, header, sizes, finished), BEGIN, END)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"header": header, "finished": finished, "rows": [r.__dict__ for r in rows]}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
