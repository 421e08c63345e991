"""Binary models' outputs, (N,) or (N, 1), imported as two class columns: logits z as [0, z], probabilities p of
class 1 as [1 - p, p]; the array's name decides, else the value range, else --binary-logits/--binary-probs; the
imported run's metrics match scikit-learn on the original binary predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, roc_auc_score

from calibview.cli import main
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.importers import import_arrays
from calibview.core.io.logits import read_split

RNG = np.random.default_rng(7)


def binary_data(n=400):
    """(logits z of class 1 (n,), labels (n,)): a slightly over-confident logistic model."""
    y = RNG.integers(0, 2, n)
    z = 1.7 * (RNG.normal(size=n) + 1.4 * (2 * y - 1))
    return z, y


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def metrics_of(out, run="m/data", split="test"):
    req = EvalRequest(file=str(out), run=run, eval_split=split, fit_split=None, calibrators=("none",), n_boot=0,
                      device="cpu")
    return {k: e.value for k, e in Engine().evaluate(req).result("none").metrics.items()}


def assert_matches_sklearn(m, p, y):
    """Calibview's metrics of the imported run against scikit-learn on the binary probabilities p of class 1
    (calibview's Brier score sums over both classes: twice the binary one)."""
    assert m["nll"] == pytest.approx(log_loss(y, p), abs=1e-9)
    assert m["brier"] == pytest.approx(2 * brier_score_loss(y, p), abs=1e-9)
    assert m["auroc"] == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert m["accuracy"] == pytest.approx(accuracy_score(y, p > 0.5), abs=1e-12)


@pytest.mark.parametrize("shape", ["flat", "column"])
def test_binary_logits_by_name_become_0_z(tmp_path, shape):
    z, y = binary_data()
    arr = z if shape == "flat" else z[:, None]
    np.savez(tmp_path / "m.npz", logits_test=arr, labels_test=y)
    notes = []
    (run,) = import_arrays(tmp_path / "m.npz", tmp_path / "out.h5", notes=notes)
    assert run.k == 2
    data = read_split(tmp_path / "out.h5", "m/data", "test")
    assert data.kind == "logits"
    np.testing.assert_array_equal(data.scores, np.stack([np.zeros_like(z), z], axis=1))
    assert len(notes) == 1 and "logits_test" in notes[0] and "[0, z]" in notes[0] and "its name" in notes[0]
    assert_matches_sklearn(metrics_of(tmp_path / "out.h5"), sigmoid(z), y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_binary_probs_by_name_become_1_minus_p_p(tmp_path, dtype):
    z, y = binary_data()
    p = sigmoid(z).astype(dtype)
    np.savez(tmp_path / "m.npz", probs_test=p, labels_test=y)
    notes = []
    import_arrays(tmp_path / "m.npz", tmp_path / "out.h5", notes=notes)
    data = read_split(tmp_path / "out.h5", "m/data", "test")
    assert data.kind == "probs" and data.scores.shape == (len(y), 2)
    np.testing.assert_array_equal(data.scores[:, 1], p)
    np.testing.assert_array_equal(data.scores[:, 0], 1 - p)
    assert "[1 - p, p]" in notes[0] and "its name" in notes[0]
    assert_matches_sklearn(metrics_of(tmp_path / "out.h5"), p.astype(np.float64), y)


def test_the_name_decides_over_the_value_range(tmp_path):
    """Logits that happen to lie in [0, 1] are still logits when the array is named so."""
    y = RNG.integers(0, 2, 50)
    z = RNG.uniform(0, 1, 50)
    np.savez(tmp_path / "m.npz", logits=z, labels=y)
    import_arrays(tmp_path / "m.npz", tmp_path / "out.h5", split="test")
    data = read_split(tmp_path / "out.h5", "m/data", "test")
    assert data.kind == "logits"
    np.testing.assert_array_equal(data.scores[:, 1], z)


def test_unnamed_npy_is_decided_by_the_value_range(tmp_path):
    z, y = binary_data(200)
    np.save(tmp_path / "scores_labels.npy", y)
    np.save(tmp_path / "scores.npy", sigmoid(z))
    notes = []
    import_arrays(tmp_path / "scores.npy", tmp_path / "p.h5", split="test", notes=notes)
    assert read_split(tmp_path / "p.h5", "scores/data", "test").kind == "probs"
    assert "every value lies in [0, 1]" in notes[0]
    np.save(tmp_path / "scores.npy", z)
    notes.clear()
    import_arrays(tmp_path / "scores.npy", tmp_path / "z.h5", split="test", notes=notes)
    assert read_split(tmp_path / "z.h5", "scores/data", "test").kind == "logits"
    assert "outside [0, 1]" in notes[0]
    assert_matches_sklearn(metrics_of(tmp_path / "z.h5", run="scores/data"), sigmoid(z), y)


def test_an_explicit_choice_wins_and_bad_probabilities_are_one_sentence(tmp_path):
    z, y = binary_data(100)
    p = sigmoid(z)
    np.savez(tmp_path / "m.npz", logits=p, labels=y)          # probabilities stored under the wrong name
    notes = []
    import_arrays(tmp_path / "m.npz", tmp_path / "out.h5", split="test", binary="probs", notes=notes)
    data = read_split(tmp_path / "out.h5", "m/data", "test")
    assert data.kind == "probs" and "binary='probs'" in notes[0]
    np.savez(tmp_path / "bad.npz", logits=z, labels=y)
    with pytest.raises(CalibviewError, match="negative probabilities"):
        import_arrays(tmp_path / "bad.npz", tmp_path / "bad.h5", binary="probs")
    with pytest.raises(CalibviewError, match="binary"):
        import_arrays(tmp_path / "m.npz", tmp_path / "x.h5", binary="odds")


def test_multiclass_arrays_are_unchanged_and_give_no_note(tmp_path):
    z = RNG.normal(size=(30, 3)).astype(np.float32)
    y = RNG.integers(0, 3, 30)
    np.savez(tmp_path / "m.npz", logits=z, labels=y)
    notes = []
    import_arrays(tmp_path / "m.npz", tmp_path / "out.h5", binary="probs", notes=notes)
    np.testing.assert_array_equal(read_split(tmp_path / "out.h5", "m/data", "all").scores, z)
    assert notes == []


def test_cli_import_of_binary_outputs_names_the_rule(tmp_path, capsys):
    z, y = binary_data(100)
    np.savez(tmp_path / "m.npz", logits=sigmoid(z), labels=y)
    assert main(["import", str(tmp_path / "m.npz"), "-o", str(tmp_path / "out.h5"), "--binary-probs"]) == 0
    captured = capsys.readouterr()
    assert "(N=100, K=2)" in captured.out
    note = captured.err.strip()
    assert note.startswith("calibview: note: m.npz: logits (100,) read as binary probabilities") and \
        "--binary-probs" in note, note
    assert read_split(tmp_path / "out.h5", "m/data", "all").kind == "probs"
    assert main(["import", str(tmp_path / "m.npz"), "-o", str(tmp_path / "q.h5"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit):                    # one or the other
        main(["import", str(tmp_path / "m.npz"), "-o", str(tmp_path / "r.h5"), "--binary-probs", "--binary-logits"])
