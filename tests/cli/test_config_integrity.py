"""Tampered inference configs: each kind of edit, also with config_sha256 recomputed so that the hash no longer
catches it, gives exit 2 (a refused field) or exit 1 with the criterion that fails; duplicate keys and non-regular
files are refused; an Ed25519 signature (release --sign, check --trust) refuses an edited and rehashed config."""

import json
import os
import subprocess
import sys

import pytest

from _release_data import RUN, write_toy
from calibview.cli import main
from calibview.cli.check import HASH_NOTE
from calibview.core.release import config as rel

FAST = ["--n-boot", "20", "--device", "cpu", "--quiet"]
LOOSE = ["--max-ece", "1", "--max-class-ece", "1", "--max-high-conf-gap", "1"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy(tmp_path_factory.mktemp("toy") / "toy.h5")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("release", "other"):
        key = ed25519.Ed25519PrivateKey.generate()
        (d / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
        (d / f"{name}.pub").write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
        out[name] = (str(d / f"{name}.key"), str(d / f"{name}.pub"))
    return out


@pytest.fixture(scope="module")
def shipped(toy, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "rel"
    rc = main(["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
               "--target-precision", "0.9", "--no-diagram", "--sign", keys["release"][0], "-o", str(out), *FAST])
    assert rc == 0
    return out / "inference_config.json"


def _one_sentence_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("calibview: error: ") and "Traceback" not in err[0], err
    return err[0]


def _edit(cfg, kind):
    if kind == "threshold-0":
        cfg["thresholds"]["global"] = 0.0
    elif kind == "threshold-minus-5":
        cfg["thresholds"]["global"] = -5
    elif kind == "per-class-garbage":
        cfg["thresholds"]["per_class"] = ["x", 7, {"a": 1}]
    elif kind == "per-class-plausible":
        cfg["thresholds"]["per_class"] = [0.11, 0.22, 0.33]
    elif kind == "fake-metrics":
        cfg["metrics"]["ece"] = 0.001
    elif kind == "fit-sha256-removed":
        del cfg["provenance"]["fit_sha256"]
    elif kind == "n-boot-huge":
        cfg["settings"]["n_boot"] = 10 ** 7
    elif kind == "temperature-list":
        cfg["calibrator"]["params"]["temperature"] = [1.5]
    elif kind == "empty-params":
        cfg["calibrator"]["params"] = {}
    elif kind == "unknown-key":
        cfg["shell"] = "rm -rf /"
    return cfg


#: kind -> the criterion that fails (exit 1), or None: refused as bad input (exit 2)
CORPUS = {"threshold-0": "thresholds match those decided on FILE's fit split", "threshold-minus-5": None,
          "per-class-garbage": None, "per-class-plausible": "thresholds match those decided on FILE's fit split",
          "fake-metrics": "stored metrics match those recomputed from FILE",
          "fit-sha256-removed": "fit split's hash matches FILE", "n-boot-huge": None, "temperature-list": None,
          "empty-params": None, "unknown-key": None}


def test_the_shipped_config_passes_every_integrity_row(shipped, toy, capsys):
    rc = main(["check", str(shipped), toy, *LOOSE, "--json", *FAST])
    rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
    assert rc == 0
    for name in set(v for v in CORPUS.values() if v):
        assert rows[name]["outcome"] == "pass" and rows[name]["value"] == "match", rows[name]


@pytest.mark.parametrize("rehash", [False, True], ids=["as-edited", "rehashed"])
@pytest.mark.parametrize("kind", list(CORPUS))
def test_a_tampered_config_exits_2_or_fails_its_criterion(shipped, toy, tmp_path, capsys, kind, rehash):
    cfg = _edit(json.loads(shipped.read_text()), kind)
    del cfg["signature"]                                  # an unsigned config: only the hash and the rules guard it
    if rehash:
        cfg["config_sha256"] = rel.config_sha256(cfg)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(cfg, indent=2))
    rc = main(["check", str(path), toy, *LOOSE, "--json", *FAST])
    if not rehash:
        assert rc == 2 and "modified after it was written" in _one_sentence_error(capsys)
    elif CORPUS[kind] is None:
        assert rc == 2
        err = _one_sentence_error(capsys)
        assert "but it must be" in err or "absent" in err, err
    else:
        rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
        assert rc == 1
        assert [n for n, r in rows.items() if r["outcome"] != "pass"] == [CORPUS[kind]], rows


def test_the_refusals_name_the_field(shipped, toy, tmp_path, capsys):
    for kind, field in [("temperature-list", "calibrator.params.temperature is [1.5]"),
                        ("empty-params", "calibrator.params.temperature is missing"),
                        ("n-boot-huge", "settings.n_boot is 10000000"),
                        ("threshold-minus-5", "thresholds.global is -5"),
                        ("unknown-key", "shell is 'rm -rf /'")]:
        cfg = _edit(json.loads(shipped.read_text()), kind)
        cfg["config_sha256"] = rel.config_sha256(cfg)
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(cfg))
        assert main(["check", str(path), toy, *FAST]) == 2
        assert field in _one_sentence_error(capsys)


def test_a_key_given_twice_is_refused_without_any_rehash(shipped, toy, tmp_path, capsys):
    text = shipped.read_text()
    t = json.loads(text)["calibrator"]["params"]["temperature"]
    needle = f'"temperature": {json.dumps(t)}'
    assert text.count(needle) == 1
    path = tmp_path / "twice.json"
    path.write_text(text.replace(needle, f'"temperature": 0.05, {needle}'))   # a first-wins parser ships 0.05
    assert json.loads(path.read_text())["calibrator"]["params"]["temperature"] == t  # the hash still matches
    assert main(["check", str(path), toy, *FAST]) == 2
    assert "'temperature' twice" in _one_sentence_error(capsys)
    out = tmp_path / "applied.h5"
    assert main(["apply", str(path), toy, "--run", RUN, "--split", "deploy", "-o", str(out)]) == 2
    assert "twice" in _one_sentence_error(capsys) and not out.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_as_the_config_is_refused_not_read(toy, tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "calibview", "check", str(fifo), toy, *FAST], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_check_without_trust_says_what_the_hash_cannot_detect(shipped, toy, capsys):
    main(["check", str(shipped), toy, *LOOSE, *FAST])
    assert HASH_NOTE in capsys.readouterr().out


def test_trust_accepts_the_signed_config_and_refuses_an_edited_rehashed_one(shipped, toy, keys, tmp_path, capsys):
    assert main(["check", str(shipped), toy, *LOOSE, "--trust", keys["release"][1], *FAST]) == 0
    out = capsys.readouterr().out
    assert "signed by the trusted key" in out and HASH_NOTE not in out
    cfg = json.loads(shipped.read_text())
    cfg["thresholds"]["global"] = 0.5
    cfg["config_sha256"] = rel.config_sha256(cfg)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(cfg))
    assert main(["check", str(edited), toy, "--trust", keys["release"][1], *FAST]) == 2
    assert "changed after it was signed" in _one_sentence_error(capsys)
    assert main(["check", str(shipped), toy, "--trust", keys["other"][1], *FAST]) == 2
    assert "signed by another key" in _one_sentence_error(capsys)
    del cfg["signature"]
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps(cfg))
    assert main(["check", str(unsigned), toy, "--trust", keys["release"][1], *FAST]) == 2
    assert "is not signed" in _one_sentence_error(capsys)
    assert main(["check", str(shipped), toy, "--trust", keys["release"][0], *FAST]) == 2
    assert "give the public key" in _one_sentence_error(capsys)


def test_a_bad_signing_key_is_refused_before_any_work(toy, keys, tmp_path, capsys):
    out = tmp_path / "rel"
    for key, words in [(keys["release"][1], "not a PEM private key"), (str(tmp_path / "none.key"), "Cannot read"),
                       (toy, "not a PEM key file")]:
        assert main(["release", toy, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "--sign", key,
                     "-o", str(out), *FAST]) == 2
        assert words in _one_sentence_error(capsys) and not out.exists()


def test_the_signature_covers_the_hash_and_every_field(shipped, keys):
    from calibview.core.release import signing

    cfg = rel.load_config(shipped)
    assert cfg["config_sha256"] == rel.config_sha256(cfg)            # the signature is outside the hash
    pub = signing.load_public_key(keys["release"][1])
    signing.verify(cfg, pub)
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    # an independent verification: the raw key, the signature and the canonical bytes spelled out here
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ed25519.Ed25519PublicKey.from_public_bytes(raw).verify(
        base64.b64decode(cfg["signature"]["value"]),
        json.dumps({k: v for k, v in cfg.items() if k != "signature"}, sort_keys=True, separators=(",", ":")).encode())
    cfg["config_sha256"] = "0" * 64
    with pytest.raises(Exception, match="changed after it was signed"):
        signing.verify(cfg, pub)
