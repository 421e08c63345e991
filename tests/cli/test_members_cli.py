"""The command line on a run with members: the member column of metrics --json and metrics.csv, --members,
uncertainty.csv, --rank-by, and bad members files refused in one sentence with exit 2."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import calibview as cv
from calibview.core.io.writer import write_run
from calibview.cli.program import main
from calibview.core.io.members.write import write_members


def _file(tmp_path):
    rng = np.random.default_rng(0)
    splits = {}
    for split in ("val", "test"):
        y = rng.integers(0, 4, 300)
        z = rng.normal(size=(3, 300, 4)).astype(np.float32)
        z[:, np.arange(300), y] += 1.0
        splits[split] = (z, y, z[0])
    path = tmp_path / "m.h5"
    write_members(path, "ens", "toy", splits)
    write_run(path, "plain", "toy", "test", logits=splits["test"][2], labels=splits["test"][1])
    write_run(path, "plain", "toy", "val", logits=splits["val"][2], labels=splits["val"][1])
    return path


def _json(capsys, *args):
    capsys.readouterr()
    assert main(["metrics", *args, "--json", "--n-boot", "0", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_metrics_json_has_a_member_column(tmp_path, capsys):
    path = _file(tmp_path)
    rows = _json(capsys, str(path), "--calibrators", "none,ts")
    ens = [(r["member"], r["calibrator"]) for r in rows if r["model"] == "ens"]
    assert ens == [(m, c) for m in ("ensemble", "deterministic", "0", "1", "2") for c in ("none", "ts")]
    assert {r["member"] for r in rows if r["model"] == "plain"} == {None}
    det = next(r for r in rows if r["member"] == "deterministic" and r["calibrator"] == "none")
    zero = next(r for r in rows if r["member"] == "0" and r["calibrator"] == "none")
    plain = next(r for r in rows if r["model"] == "plain" and r["calibrator"] == "none")
    assert det["nll"] == zero["nll"] == plain["nll"]          # the deterministic scores here are member 0's
    only = _json(capsys, str(path), "--run", "ens/toy", "--members", "ensemble")
    assert [r["member"] for r in only] == ["ensemble"] * len(only)
    none = _json(capsys, str(path), "--run", "ens/toy", "--members", "none")
    assert [r["member"] for r in none] == [None] * len(none)
    assert [r["nll"] for r in none] == [r["nll"] for r in only]


def test_report_writes_member_rows_and_uncertainty_csv(tmp_path, capsys):
    path = _file(tmp_path)
    out = {}
    for rank in ("confidence", "mi"):
        out[rank] = tmp_path / rank
        assert main(["report", str(path), "--n-boot", "0", "--out", str(out[rank]), "--no-diagram", "--quiet",
                     "--rank-by", rank]) == 0
    with open(out["mi"] / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["member"] for r in rows if r["model"] == "plain"] == ["", ""]
    assert [r["member"] for r in rows if r["model"] == "ens"][:2] == ["ensemble", "ensemble"]
    with open(out["mi"] / "uncertainty.csv") as f:
        unc = list(csv.DictReader(f))
    assert len(unc) == 1 and unc[0]["model"] == "ens" and unc[0]["members"] == "3"
    d = cv.evaluate(members=np.stack([np.asarray(h5py.File(path)["ens/toy/test/members"][i]) for i in range(3)]),
                    labels=np.asarray(h5py.File(path)["ens/toy/test/labels"]), n_boot=0).uncertainty
    assert float(unc[0]["epistemic_mean"]) == float(d.epistemic.mean())
    assert float(unc[0]["total_q50"]) == float(np.quantile(d.total, 0.5))
    sel = {rank: (out[rank] / "selective.csv").read_text() for rank in out}
    assert sel["mi"] != sel["confidence"]
    ens_lines = [line for line in sel["mi"].splitlines() if line.startswith("plain,")]
    assert ens_lines == [line for line in sel["confidence"].splitlines() if line.startswith("plain,")]


def test_bad_members_files_exit_2_with_one_sentence(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    bad = tmp_path / "one.h5"
    with h5py.File(bad, "w") as f:
        f["r/d/test/members"] = np.zeros((1, 5, 3), np.float32)
        f["r/d/test/members"].attrs["kind"] = "ensemble"
        f["r/d/test/labels"] = np.zeros(5, np.int64)
    for args, fragment in [(["metrics", str(bad), "--json"], "M = 1"),
                           (["metrics", str(_file(tmp_path)), "--members", "several"], "--members")]:
        r = subprocess.run([sys.executable, "-m", "calibview.cli.program", *args], capture_output=True, text=True,
                           env=env)
        assert r.returncode == 2, r.stderr
        assert fragment in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_slices_by_epistemic_tercile_match_numpy_on_the_demo_ensemble(demo_file, capsys):
    """``slices --by epistemic``: three slices of the ensemble's samples by the rank of their mutual information
    (computed here in numpy from the two members' logits), each slice's accuracy and 15-bin ECE as numpy's."""
    import json

    from calibview.cli import main
    from calibview.core.io.logits import read_split

    a = read_split(demo_file, "resnet110-brier/cifar10", "test")
    b = read_split(demo_file, "resnet110-flsd53/cifar10", "test")

    def softmax(z):
        z = np.asarray(z, np.float64)
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    pa, pb = softmax(a.scores), softmax(b.scores)
    p = (pa + pb) / 2
    ent = lambda q: -(q * np.log(np.clip(q, 1e-300, None))).sum(1)     # noqa: E731
    mi = ent(p) - (ent(pa) + ent(pb)) / 2
    n = mi.shape[0]
    tercile = np.empty(n, int)
    tercile[np.argsort(mi, kind="stable")] = np.arange(n) * 3 // n
    conf, pred, y = p.max(1), p.argmax(1), np.asarray(a.labels)
    capsys.readouterr()
    assert main(["slices", str(demo_file), "--run", "resnet110-ensemble/cifar10", "--by", "epistemic",
                 "--calibrators", "none", "--n-boot", "0", "--json", "--quiet"]) == 0
    rows = {r["slice"]: r for r in json.loads(capsys.readouterr().out) if r["slice"] is not None}
    assert list(rows) == ["low MI", "mid MI", "high MI"]
    for t, name in enumerate(rows):
        m = tercile == t
        assert rows[name]["n"] == m.sum()
        assert rows[name]["accuracy"] == pytest.approx((pred[m] == y[m]).mean(), abs=1e-12)
        edges = np.linspace(0, 1, 16)
        idx = np.clip(np.searchsorted(edges, conf[m], side="left") - 1, 0, 14)
        ece = sum(abs((pred[m] == y[m])[idx == j].mean() - conf[m][idx == j].mean()) * (idx == j).mean()
                  for j in range(15) if (idx == j).any())
        assert rows[name]["ece"] == pytest.approx(ece, abs=1e-9)
    # the models disagree most where the ensemble is least accurate
    assert rows["high MI"]["accuracy"] < rows["low MI"]["accuracy"]


def test_metrics_forgets_each_finished_run_but_keeps_what_later_runs_share(tmp_path, capsys, monkeypatch):
    """Nothing reads the command's engine after it, so each run's cached results go once no later request of the
    command names that run and member (a members run's per-member vectors piled up otherwise). Each member still
    fits once for both evaluation splits; the resample counts stay, shared by every run on samples of the same
    size (one draw for the whole command); and the numbers are those of an engine that keeps everything."""
    from calibview.cli.options import evaluate_all
    from calibview.cli.program import build_parser
    from calibview.core.evaluation import engine as engine_mod
    from calibview.core.reports.tables import metrics_rows
    from calibview.core.stats.resampling import Resampler

    path = _file(tmp_path)
    engines, draws = [], []
    real_draw = Resampler.counts_matrix

    class Spy(engine_mod.Engine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(engine_mod, "Engine", Spy)
    monkeypatch.setattr(Resampler, "counts_matrix", lambda self: draws.append(1) or real_draw(self))
    args = build_parser().parse_args(["metrics", str(path), "--n-boot", "50", "--quiet", "--calibrators", "none,ts",
                                      "--eval-split", "test,val", "--fit-split", "val"])
    evs = evaluate_all(args)
    rows = [(ev.run.name, ev.request.member, ev.request.eval_split) for ev in evs]
    assert len(rows) == len(set(rows)) == 12 and len(engines) == 1     # (ens: ensemble, deterministic, 3 members;
    fits = {}                                                          # plain) x (test, val)
    for ev in evs:
        fits.setdefault((ev.run.name, ev.request.member), []).extend(ev.counters.fitted)
    assert len(fits) == 6 and all(f == ["ts"] for f in fits.values()), fits     # once for both splits
    assert {key[0] for key in engines[0].cache._items} == {"counts", "units"}
    assert len(draws) == 1                     # every split of every run here has 300 samples and 4 classes

    monkeypatch.setattr(engine_mod.Engine, "forget_run", lambda self, ev, unless=(): 0)
    kept = evaluate_all(args)
    same = [json.dumps(metrics_rows(e), sort_keys=True, default=str) for e in (kept, evs)]      # NaN as NaN
    assert same[0] == same[1] and len(metrics_rows(evs)) == 24
    assert {"fit", "score", "point"} <= {key[0] for key in engines[-1].cache._items}
