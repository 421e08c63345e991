"""``calibview.collect_logits`` and ``calibview collect``: logits from small torch models built here, checked
against a plain eval-mode loop over the same batches (the independent source), and the file read back by the
readers and the commands that evaluate it."""

from __future__ import annotations

import json
import logging
import os
import re

import h5py
import numpy as np
import pytest
import torch

import calibview
from calibview.cli.program import main
from calibview.core.errors import CalibviewError
from calibview.core.io.discovery import list_runs
from calibview.core.io.logits import read_meta, read_split
from calibview.core.io.collect.partial import partial_path
from calibview.core.io.writer import write_run

K, D, N, B = 4, 6, 70, 16


def net(dropout: bool = True, seed: int = 0) -> torch.nn.Module:
    """A classifier with batch-norm (and dropout), its running statistics moved off their defaults."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(D, 12), torch.nn.BatchNorm1d(12), torch.nn.ReLU()]
    layers += [torch.nn.Dropout(0.5)] if dropout else []
    model = torch.nn.Sequential(*layers, torch.nn.Linear(12, K))
    model.train()
    with torch.no_grad():
        model(torch.randn(64, D) * 3 + 1)           # batch-norm statistics that differ from the batch ones
    return model


def data(seed: int = 1, n: int = N):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, D, generator=g), torch.randint(0, K, (n,), generator=g)


def batches(x, y, meta: bool = False, fail_after=None):
    """The batches of (x, y) in order; ``fail_after=j`` raises after j batches (an interrupted loader)."""
    for j, i in enumerate(range(0, len(y), B)):
        if fail_after is not None and j == fail_after:
            raise RuntimeError("the loader broke")
        xb, yb = x[i:i + B], y[i:i + B]
        yield (xb, yb, {"group": [f"g{int(v) % 3}" for v in yb], "size": xb.abs().sum(1)}) if meta else (xb, yb)


def plain(model, x) -> np.ndarray:
    """The reference: an eval-mode loop by hand, batch by batch."""
    model.eval()
    with torch.no_grad():
        return np.concatenate([model(x[i:i + B]).float().numpy() for i in range(0, len(x), B)])


def modes(model) -> list[bool]:
    return [m.training for m in model.modules()]


def arrays(path) -> dict:
    """Every dataset of the file (and its attributes but collected_with), by path."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = (obj.dtype, obj[()], dict(obj.attrs))
        f.visititems(visit)
    return out


def test_a_model_in_training_mode_is_refused_before_it_runs(tmp_path):
    model, (x, y) = net(), data()
    seen = []

    def loader():
        seen.append(1)
        yield from batches(x, y)

    with pytest.raises(CalibviewError, match="training mode.*model.eval\\(\\) first.*allow_train=True"):
        calibview.collect_logits(model, loader(), tmp_path / "o.h5", "m", "d", "test")
    assert seen == [] and os.listdir(tmp_path) == []
    assert all(modes(model))


def test_eval_mode_logits_equal_a_plain_eval_loop(tmp_path):
    model, (x, y) = net(), data()
    model.eval()
    info = calibview.collect_logits(model, batches(x, y), tmp_path / "o.h5", "m", "d", "test")
    assert (info.n, info.k, info.dtype) == (N, K, "float32")
    got = read_split(tmp_path / "o.h5", "m/d", "test")
    assert np.array_equal(got.scores, plain(net().eval(), x))
    assert np.array_equal(got.labels, y.numpy())
    assert not any(modes(model))
    assert os.listdir(tmp_path) == ["o.h5"]                    # the hidden file of the batches is gone


def test_allow_train_collects_in_eval_mode_and_gives_the_training_mode_back(tmp_path):
    model, (x, y) = net(), data()
    stats = model[1].running_mean.clone()
    calibview.collect_logits(model, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=B),
                             tmp_path / "o.h5", "m", "d", "test", allow_train=True)
    assert all(modes(model))
    assert torch.equal(model[1].running_mean, stats)            # batch-norm never ran in training mode
    assert np.array_equal(read_split(tmp_path / "o.h5", "m/d", "test").scores, plain(net().eval(), x))


class Probe(torch.nn.Module):
    """Records, on every forward, whether it ran in training mode, under inference mode and under autocast."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(D, K)
        self.calls: list[tuple[bool, bool, bool]] = []

    def forward(self, x):
        self.calls.append((self.training, torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu")))
        return self.lin(x)


def test_inference_mode_and_no_autocast_even_inside_the_callers_autocast(tmp_path):
    torch.manual_seed(0)
    probe, (x, y) = Probe().eval(), data()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        calibview.collect_logits(probe, batches(x, y), tmp_path / "o.h5", "m", "d", "test")
    assert probe.calls == [(False, True, False)] * 5
    with torch.no_grad():
        expected = probe.lin(x).numpy()                         # float32 all the way
    got = read_split(tmp_path / "o.h5", "m/d", "test").scores
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_the_mode_is_restored_after_an_exception_from_the_loader(tmp_path, caplog):
    model, (x, y) = net(), data()
    model.eval()
    model[3].train()                                            # a mixed state, restored module by module
    before = modes(model)
    # the level on calibview's own logger: a command run earlier in the session (--quiet) may have raised it
    with caplog.at_level(logging.WARNING, logger="calibview"), pytest.raises(RuntimeError, match="the loader broke"):
        calibview.collect_logits(model, batches(x, y, fail_after=2), tmp_path / "o.h5", "m", "d", "test",
                                 allow_train=True)
    assert modes(model) == before
    assert not (tmp_path / "o.h5").exists()                     # the destination holds complete splits only
    assert "the 2 complete batches of m/d/test are kept in" in caplog.text


def test_a_bfloat16_model_stores_float32(tmp_path):
    model, (x, y) = net().eval().to(torch.bfloat16), data()
    calibview.collect_logits(model, batches(x, y), tmp_path / "o.h5", "m", "d", "test")
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["m/d/test/logits"].dtype == np.float32
        assert json.loads(f["m/d/test"].attrs["collected_with"])["dtype"] == "bfloat16"
    with torch.no_grad():
        expected = np.concatenate([model(x[i:i + B].bfloat16()).float().numpy() for i in range(0, N, B)])
    assert np.array_equal(read_split(tmp_path / "o.h5", "m/d", "test").scores, expected)
    assert next(model.parameters()).dtype == torch.bfloat16


def test_an_interrupted_collection_resumed_equals_an_uninterrupted_one(tmp_path):
    (x, y) = data()
    names = ["a", "b", "c", "d"]
    whole, cut = tmp_path / "whole.h5", tmp_path / "cut.h5"
    calibview.collect_logits(net().eval(), batches(x, y, meta=True), whole, "m", "d", "test", members=3,
                             class_names=names)
    model = net().eval()
    with pytest.raises(RuntimeError):
        calibview.collect_logits(model, batches(x, y, meta=True, fail_after=3), cut, "m", "d", "test", members=3,
                                 class_names=names)
    assert not cut.exists() and os.path.exists(partial_path(str(cut), "/m/d", "test"))
    torch.manual_seed(123)                                      # another global random state than the first run's
    calls = []
    model.register_forward_hook(lambda *a: calls.append(1))
    calibview.collect_logits(model, batches(x, y, meta=True), cut, "m", "d", "test", members=3, class_names=names)
    assert len(calls) == 2 * (1 + 3)                            # only the two batches not collected before
    a, b = arrays(whole), arrays(cut)
    assert set(a) == set(b) == {"m/d/test/logits", "m/d/test/labels", "m/d/test/members",
                                "m/d/test/meta/group", "m/d/test/meta/size"}
    for name in a:
        assert a[name][0] == b[name][0] and a[name][2] == b[name][2], name
        assert np.array_equal(a[name][1], b[name][1]), name
    assert not os.path.exists(partial_path(str(cut), "/m/d", "test"))
    with h5py.File(cut, "r") as f:
        assert json.loads(f["m/d/test"].attrs["collected_with"])["batches"] == 5
    assert list(read_meta(cut, "m/d", "test", "group")) == [f"g{int(v) % 3}" for v in y]


def test_resuming_with_other_batches_is_refused(tmp_path):
    (x, y), out = data(), tmp_path / "o.h5"
    with pytest.raises(RuntimeError):
        calibview.collect_logits(net().eval(), batches(x, y, fail_after=2), out, "m", "d", "test")
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(5))
    with pytest.raises(CalibviewError, match="same batches in the same order"):
        calibview.collect_logits(net().eval(), batches(x[perm], y[perm]), out, "m", "d", "test")
    assert not out.exists()


def test_a_finished_split_is_not_collected_twice(tmp_path):
    (x, y), out = data(), tmp_path / "o.h5"
    calibview.collect_logits(net().eval(), batches(x, y), out, "m", "d", "test")
    before = out.read_bytes()
    info = calibview.collect_logits(net().eval(), batches(x, y, fail_after=0), out, "m", "d", "test")
    assert info.n == N and out.read_bytes() == before


def test_collected_with_records_how(tmp_path):
    (x, y), out = data(), tmp_path / "o.h5"
    calibview.collect_logits(net().eval(), batches(x, y), out, "m", "d", "test", device="cpu")
    with h5py.File(out, "r") as f:
        info = json.loads(f["m/d/test"].attrs["collected_with"])
    assert info == {"calibview": calibview.__version__, "torch": torch.__version__, "dtype": "float32",
                    "eval_mode": True, "device": "cpu", "batches": 5}


def test_mc_dropout_members_differ_across_passes_beside_the_eval_logits(tmp_path):
    model, (x, y), out = net().eval(), data(), tmp_path / "o.h5"
    stats, rng = model[1].running_mean.clone(), torch.get_rng_state()
    calibview.collect_logits(model, batches(x, y), out, "m", "d", "test", members=4)
    with h5py.File(out, "r") as f:
        members = f["m/d/test/members"]
        assert members.shape == (4, N, K) and members.dtype == np.float32
        assert members.attrs["kind"] == "mc-dropout"
        m = members[()]
    for i in range(4):
        for j in range(i):
            assert not np.allclose(m[i], m[j])
    eval_logits = read_split(out, "m/d", "test", member="deterministic").scores   # not the ensemble
    assert np.array_equal(eval_logits, plain(net().eval(), x))
    assert not np.allclose(m.mean(0), eval_logits, atol=1e-3)
    # only the dropout layers trained: with dropout switched off the passes are the eval-mode logits
    model[3].p = 0.0
    calibview.collect_logits(model, batches(x, y), out, "m", "d", "p0", members=2)
    p0 = h5py.File(out, "r")["m/d/p0/members"][()]
    np.testing.assert_allclose(p0, np.stack([eval_logits] * 2), rtol=1e-6, atol=1e-6)
    assert torch.equal(model[1].running_mean, stats) and torch.equal(torch.get_rng_state(), rng)
    assert not any(modes(model))


def test_members_on_a_model_without_dropout_is_refused(tmp_path):
    (x, y), out = data(), tmp_path / "o.h5"
    with pytest.raises(CalibviewError, match="members=3 .* no dropout layer"):
        calibview.collect_logits(net(dropout=False).eval(), batches(x, y), out, "m", "d", "test", members=3)
    assert os.listdir(tmp_path) == []


def test_the_collected_file_is_evaluated_like_the_same_arrays_written_by_hand(tmp_path, capsys):
    model, fit, test = net().eval(), data(seed=2, n=150), data(seed=3, n=90)
    out, ref = tmp_path / "o.h5", tmp_path / "ref.h5"
    for split, (x, y) in (("val", fit), ("test", test)):
        calibview.collect_logits(model, batches(x, y), out, "m", "d", split, class_names=list("abcd"))
        write_run(ref, "m", "d", split, plain(net().eval(), x), y.numpy(), class_names=list("abcd"))
    capsys.readouterr()
    assert main(["runs", str(out)]) == 0
    assert capsys.readouterr().out == f"m/d\tK={K}\tval (N=150, logits, float32), test (N=90, logits, float32)\n"
    rows = {}
    for f in (out, ref):
        assert main(["metrics", str(f), "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet"]) == 0
        rows[f] = json.loads(capsys.readouterr().out)
    assert [r["calibrator"] for r in rows[out]] == ["none", "ts"]
    assert rows[out] == rows[ref]


SCRIPT = '''
import torch

def build(split):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 3)).eval()
    g = torch.Generator().manual_seed({"val": 1, "test": 2}[split])
    x, y = torch.randn(40, 3, generator=g), torch.randint(0, 3, (40,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    return model, loader, ["cat", "dog", "bird"]
'''


def test_the_command_collects_what_the_script_builds(tmp_path, capsys):
    (tmp_path / "toy.py").write_text(SCRIPT)
    out = tmp_path / "o.h5"
    for split in ("val", "test"):
        assert main(["collect", f"{tmp_path / 'toy.py'}:build", "-o", str(out), "--dataset", "c3", "--split", split,
                     "--quiet"]) == 0
    assert main(["collect", f"{tmp_path / 'toy.py'}:build", "-o", str(out), "--model", "mc", "--dataset", "c3",
                 "--members", "2", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert f"{out}: toy/c3/val (N=40, K=3)" in printed.out and f"{out}: toy/c3/test (N=40, K=3)" in printed.out
    toy, mc = list_runs(out)
    assert (toy.name, toy.split_names, toy.class_names) == ("toy/c3", ("val", "test"), ("cat", "dog", "bird"))
    assert (mc.name, mc.split_names) == ("mc/c3", ("test",))
    with h5py.File(out, "r") as f:
        assert f["mc/c3/test/members"].shape == (2, 40, 3)
    ns = {}
    exec(SCRIPT, ns)
    model, loader, _ = ns["build"]("test")
    with torch.no_grad():
        expected = torch.cat([model(xb) for xb, _ in loader]).numpy()
    assert np.array_equal(read_split(out, "toy/c3", "test").scores, expected)


@pytest.mark.parametrize("target, message", [
    ("nosuch.py:build", "the script does not exist"),
    ("toy.py", "SCRIPT.py:FUNC"),
    ("toy.py:missing", "defines no function missing"),
    ("toy.py:bad", "must return \\(model, loader, names\\)"),
])
def test_the_command_refuses_a_bad_target_in_one_sentence(tmp_path, capsys, target, message, monkeypatch):
    (tmp_path / "toy.py").write_text(SCRIPT + "\ndef bad():\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    assert main(["collect", target, "-o", "o.h5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("calibview: error: ") and len(err.strip().splitlines()) == 1
    assert re.search(message, err)
    assert not (tmp_path / "o.h5").exists()


def test_the_command_says_the_flags_of_a_refused_model(tmp_path, capsys):
    (tmp_path / "toy.py").write_text(SCRIPT.replace(".eval()", ".train()"))
    assert main(["collect", f"{tmp_path / 'toy.py'}:build", "-o", str(tmp_path / "o.h5")]) == 2
    assert "pass --allow-train to collect" in capsys.readouterr().err
    assert main(["collect", f"{tmp_path / 'toy.py'}:build", "-o", str(tmp_path / "o.h5"), "--allow-train",
                 "--quiet"]) == 0
