"""Importing .npz, .npy and .pt logits into the HDF5 format, and refusing anything that needs pickle."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
import torch

from calibview.core.errors import CalibviewError
from calibview.core.io.importers import import_arrays, labels_for_npy
from calibview.core.io.discovery import list_runs
from calibview.core.io.logits import read_split

RNG = np.random.default_rng(1)


def logits(n=30, k=4):
    return RNG.standard_normal((n, k)).astype(np.float32)


def labels(n=30, k=4):
    return RNG.integers(0, k, n)


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(CalibviewError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message.endswith(".") and ". " not in message, message
    return message


def assert_split(out, run_name, split, scores, y):
    data = read_split(out, run_name, split)
    np.testing.assert_array_equal(data.scores, scores)
    np.testing.assert_array_equal(data.labels, y)


def test_npz_with_one_unsuffixed_pair(tmp_path):
    z, y = logits(), labels()
    np.savez(tmp_path / "resnet.npz", logits=z, labels=y, notes=np.arange(3))
    calls = []
    (run,) = import_arrays(tmp_path / "resnet.npz", tmp_path / "out.h5", progress=lambda f, m: calls.append(f))
    assert (run.name, run.model, run.dataset, run.split_names) == ("resnet/data", "resnet", "data", ("all",))
    assert [r.name for r in list_runs(tmp_path / "out.h5")] == ["resnet/data"]
    assert_split(tmp_path / "out.h5", "resnet/data", "all", z, y)
    assert calls[0] == 0.0 and calls[-1] == 1.0


def test_npz_with_suffixed_splits_and_names(tmp_path):
    zv, yv, zt, yt = logits(20), labels(20), logits(35), labels(35)
    np.savez_compressed(tmp_path / "src.npz", logits_val=zv, labels_val=yv, logits_test=zt, labels_test=yt)
    out = tmp_path / "out.h5"
    (run,) = import_arrays(tmp_path / "src.npz", out, model="vgg", dataset="cifar10")
    assert run.name == "vgg/cifar10" and set(run.split_names) == {"val", "test"}
    assert_split(out, "vgg/cifar10", "val", zv, yv)
    assert_split(out, "vgg/cifar10", "test", zt, yt)
    # the split argument picks one suffix; a second import appends to the same file as another run
    (only,) = import_arrays(tmp_path / "src.npz", out, model="vgg", dataset="again", split="test")
    assert only.split_names == ("test",)
    assert {r.name for r in list_runs(out)} == {"vgg/cifar10", "vgg/again"}


def test_npz_probs(tmp_path):
    p = np.full((12, 3), 1 / 3)
    y = labels(12, 3)
    np.savez(tmp_path / "p.npz", probs=p, labels=y)
    (run,) = import_arrays(tmp_path / "p.npz", tmp_path / "o.h5", split="test")
    assert run.split("test").kind == "probs"
    assert_split(tmp_path / "o.h5", "p/data", "test", p, y)


def test_npy_pair_next_to_each_other(tmp_path):
    z, y = logits(), labels()
    np.save(tmp_path / "X_logits.npy", z)
    np.save(tmp_path / "X_labels.npy", y)
    assert labels_for_npy(tmp_path / "X_logits.npy") == tmp_path / "X_labels.npy"
    (run,) = import_arrays(tmp_path / "X_logits.npy", tmp_path / "o.h5")
    assert run.name == "X/data" and run.split_names == ("all",)
    assert_split(tmp_path / "o.h5", "X/data", "all", z, y)


def test_npy_with_shared_labels_file(tmp_path):
    z, y = logits(), labels()
    np.save(tmp_path / "scores.npy", z)
    np.save(tmp_path / "labels.npy", y)
    (run,) = import_arrays(tmp_path / "scores.npy", tmp_path / "o.h5", dataset="imagenet", split="val")
    assert run.name == "scores/imagenet"
    assert_split(tmp_path / "o.h5", "scores/imagenet", "val", z, y)


def test_npy_without_labels(tmp_path):
    np.save(tmp_path / "lonely_logits.npy", logits())
    message = error_of(import_arrays, tmp_path / "lonely_logits.npy", tmp_path / "o.h5")
    assert "lonely_logits.npy" in message and "lonely_labels.npy" in message and "labels.npy" in message


@pytest.mark.parametrize("suffix", [".pt", ".pth"])
def test_torch_dict_of_tensors(tmp_path, suffix):
    zv, yv = logits(20), labels(20)
    src = tmp_path / f"net{suffix}"
    torch.save({"logits_val": torch.from_numpy(zv), "labels_val": torch.from_numpy(yv),
                "logits_test": zv[:5], "labels_test": yv[:5]}, src)
    (run,) = import_arrays(src, tmp_path / "o.h5")
    assert run.name == "net/data" and set(run.split_names) == {"val", "test"}
    assert_split(tmp_path / "o.h5", "net/data", "val", zv, yv)
    assert_split(tmp_path / "o.h5", "net/data", "test", zv[:5], yv[:5])


def test_torch_bfloat16_is_widened(tmp_path):
    z = torch.randn(10, 3, dtype=torch.bfloat16)
    torch.save({"logits": z, "labels": torch.arange(10) % 3}, tmp_path / "b.pt")
    import_arrays(tmp_path / "b.pt", tmp_path / "o.h5")
    assert_split(tmp_path / "o.h5", "b/data", "all", z.float().numpy(), np.arange(10) % 3)


class Payload:
    """A custom class: loading it needs full unpickling, which the importer must refuse."""

    def __init__(self):
        self.logits = np.zeros((3, 2))

    def __reduce__(self):  # would run code when unpickled
        return (os.system, ("echo pwned",))


def test_pickled_custom_object_in_pt_is_refused(tmp_path):
    src = tmp_path / "evil.pt"
    torch.save({"logits": torch.zeros(3, 2), "labels": torch.zeros(3, dtype=torch.long), "extra": Payload()}, src)
    message = error_of(import_arrays, src, tmp_path / "o.h5")
    assert "evil.pt" in message and "refusing" in message and "torch.save" in message
    assert not (tmp_path / "o.h5").exists()


def test_pt_that_is_not_a_dict(tmp_path):
    torch.save([torch.zeros(3, 2)], tmp_path / "list.pt")
    assert "holds a list" in error_of(import_arrays, tmp_path / "list.pt", tmp_path / "o.h5")


def test_pt_ordered_dict_is_accepted(tmp_path):
    z, y = logits(8), labels(8)
    torch.save(collections.OrderedDict(logits=torch.from_numpy(z), labels=torch.from_numpy(y)), tmp_path / "od.pt")
    (run,) = import_arrays(tmp_path / "od.pt", tmp_path / "o.h5")
    assert_split(tmp_path / "o.h5", run, "all", z, y)


def test_object_arrays_in_npz_are_refused(tmp_path):
    np.savez(tmp_path / "obj.npz", logits=np.array([[0.1, 0.2]], dtype=object), labels=np.array([0]))
    assert "pickle" in error_of(import_arrays, tmp_path / "obj.npz", tmp_path / "o.h5")


def test_source_errors_name_the_source_array(tmp_path):
    z = logits(10)
    z[[1, 6]] = np.inf
    np.savez(tmp_path / "bad.npz", logits_val=z, labels_val=labels(10))
    message = error_of(import_arrays, tmp_path / "bad.npz", tmp_path / "o.h5")
    assert "bad.npz" in message and "logits_val" in message and "2 of 10 rows" in message
    np.savez(tmp_path / "floats.npz", logits=logits(), labels=labels().astype(np.float32))
    message = error_of(import_arrays, tmp_path / "floats.npz", tmp_path / "o.h5")
    assert "floats.npz" in message and "labels has dtype float32" in message
    assert not (tmp_path / "o.h5").exists()


def test_missing_keys_and_pairs(tmp_path):
    np.savez(tmp_path / "nokeys.npz", weights=np.zeros(3))
    assert "no 'logits' or 'probs' array found (keys: weights)" in error_of(
        import_arrays, tmp_path / "nokeys.npz", tmp_path / "o.h5")
    np.savez(tmp_path / "half.npz", logits_val=logits(), labels_test=labels())
    assert "logits_val has no matching labels_val" in error_of(import_arrays, tmp_path / "half.npz",
                                                                tmp_path / "o.h5")
    np.savez(tmp_path / "split.npz", logits_val=logits(), labels_val=labels())
    assert "available splits: val" in error_of(import_arrays, tmp_path / "split.npz", tmp_path / "o.h5",
                                               split="test")


def test_unsupported_or_missing_source_and_existing_split(tmp_path):
    (tmp_path / "x.csv").write_text("1,2\n")
    assert "cannot import '.csv'" in error_of(import_arrays, tmp_path / "x.csv", tmp_path / "o.h5")
    assert "does not exist" in error_of(import_arrays, tmp_path / "nope.npz", tmp_path / "o.h5")
    np.savez(tmp_path / "r.npz", logits=logits(), labels=labels())
    import_arrays(tmp_path / "r.npz", tmp_path / "o.h5")
    assert "/r/data/all already exists" in error_of(import_arrays, tmp_path / "r.npz", tmp_path / "o.h5")
