"""The inference config, its hashes and the release statistics, against independent computations."""

import hashlib
import json

import h5py
import numpy as np
import pytest
from scipy.stats import binomtest

from _release_data import NAMES, RUN, ece_direct, softmax, toy_logits, write_toy
from calibview.core.release import config as rel
from calibview.core.release import stats as rs
from calibview.core.release.acceptance import evaluate_config
from calibview.core.release.drift import drift
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import CalibviewError
from calibview.core.release.build import build_release
from calibview.core.reports.html import render

FAST = dict(n_boot=20, device="cpu")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy(tmp_path_factory.mktemp("toy") / "toy.h5")


@pytest.fixture(scope="module")
def released(toy):
    return build_release(Engine(), toy, RUN, "ts", "val", "deploy", target_precision=0.9, **FAST)


def _stored_sha(path, split_path, kind="logits", rows=None):
    with h5py.File(path, "r") as f:
        z, y = f[f"{split_path}/{kind}"][()], f[f"{split_path}/labels"][()]
    if rows is not None:
        z, y = z[rows], y[rows]
    return hashlib.sha256(np.ascontiguousarray(z).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()


def test_split_hash_is_sha256_of_the_stored_bytes(toy, tmp_path, monkeypatch):
    assert rel.split_sha256(toy, RUN, "val") == _stored_sha(toy, "/net/toy/val")
    monkeypatch.setattr(rel, "HASH_ROWS_BYTES", 40)          # many small reads give the same digest
    assert rel.split_sha256(toy, RUN, "val") == _stored_sha(toy, "/net/toy/val")
    # the stored dtype and byte order, not what the reader converts to: big-endian float64 probabilities
    path = tmp_path / "be.h5"
    p = softmax(toy_logits(50, 9)[0])
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d/test")
        g.create_dataset("probs", data=p.astype(">f8"))
        g.create_dataset("labels", data=np.arange(50) % 3)
    assert rel.split_sha256(path, "m/d", "test") == _stored_sha(path, "/m/d/test", "probs")
    rows = np.array([1, 4, 7, 30])
    assert rel.split_sha256(path, "m/d", "test", rows) == _stored_sha(path, "/m/d/test", "probs", rows)


def test_config_has_the_issue_keys_and_a_canonical_hash(released, toy):
    cfg = released.config
    assert list(cfg) == list(rel.CONFIG_KEYS)
    assert cfg["schema"] == "calibview.inference-config/1"
    assert (cfg["model"], cfg["dataset"], cfg["class_names"]) == ("net", "toy", list(NAMES))
    assert set(cfg["provenance"]) == set(rel.PROVENANCE_KEYS)
    assert set(cfg["settings"]) == set(rel.SETTINGS_KEYS)
    assert set(cfg["thresholds"]) == {"global", "per_class", "target_precision"}
    assert cfg["calibrator"]["method"] == "ts" and cfg["parent"] is None
    assert cfg["provenance"]["fit_sha256"] == _stored_sha(toy, "/net/toy/val")
    assert cfg["provenance"]["eval_sha256"] == _stored_sha(toy, "/net/toy/deploy")
    assert cfg["metrics"]["ece"] == pytest.approx(released.evaluation.result("ts").metrics["ece"].value)
    # written and read back, the hash is recomputed independently of calibview
    text = rel.config_text(cfg)
    loaded = json.loads(text)
    body = {k: v for k, v in loaded.items() if k != "config_sha256"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert digest == loaded["config_sha256"]
    assert rel.verify_config(loaded) == loaded


def test_a_tampered_config_is_refused_in_one_sentence(released):
    cfg = json.loads(rel.config_text(released.config))
    cfg["calibrator"]["params"]["temperature"] *= 0.5
    with pytest.raises(CalibviewError, match="modified after it was written"):
        rel.verify_config(cfg, "x.json")
    with pytest.raises(CalibviewError, match="not a calibview inference config"):
        rel.verify_config({"method": "ts"}, "x.json")


def test_per_class_thresholds_match_a_brute_force_scan(released, toy):
    eng = Engine()
    fitted = rel.calibrator_of(released.config)
    from calibview.core.io.logits import read_split
    import torch

    d = read_split(toy, RUN, "val")
    p = fitted.apply(torch.from_numpy(np.asarray(d.scores))).exp().numpy()
    conf, pred = p.max(axis=1), p.argmax(axis=1)
    correct = pred == d.labels
    for c in range(3):
        m = pred == c
        best = None
        for t in sorted(set(conf[m])):
            keep = m & (conf >= t)
            if correct[keep].mean() >= 0.9:
                best = t
                break
        got = released.config["thresholds"]["per_class"][c]
        assert (got is None and best is None) or got == pytest.approx(best, abs=1e-12)
    keep_all = [t for t in sorted(set(conf)) if correct[conf >= t].mean() >= 0.9]
    assert released.config["thresholds"]["global"] == pytest.approx(keep_all[0], abs=1e-12)
    del eng


def test_class_slices_are_the_subsets_evaluated_on_their_own(released, toy):
    fitted = rel.calibrator_of(released.config)
    from calibview.core.io.logits import read_split
    import torch

    d = read_split(toy, RUN, "deploy")
    p = fitted.apply(torch.from_numpy(np.asarray(d.scores))).exp().numpy()
    for row in released.per_class:
        m = d.labels == row["class_index"]
        assert row["n"] == m.sum()
        assert row["ece"] == pytest.approx(ece_direct(p[m], d.labels[m]), abs=1e-12)
        assert row["ece_lo"] <= row["ece_hi"]


def test_audit_wilson_interval_matches_scipy():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1, 400)
    correct = (rng.uniform(size=400) < conf - 0.1).astype(float)
    for a in rs.audit(conf, correct, (0.8, 0.95), level=0.9):
        keep = conf >= a["threshold"]
        ci = binomtest(int(correct[keep].sum()), int(keep.sum())).proportion_ci(0.9, method="wilson")
        assert (a["acc_lo"], a["acc_hi"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert a["flagged"] == (not ci.low <= conf[keep].mean() <= ci.high)


def test_aurc_matches_a_direct_loop_with_ties():
    rng = np.random.default_rng(1)
    conf = np.round(rng.uniform(size=300), 1)            # many ties
    correct = (rng.uniform(size=300) < conf).astype(float)
    out = rs.risk_coverage(conf, correct)
    n = len(conf)
    total = 0.0
    for k in range(1, n + 1):
        t = np.sort(conf)[::-1][k - 1]
        group_end = int((conf >= t).sum())               # r(k) evaluated at the end of k's tie group
        total += 1 - correct[conf >= t].sum() / group_end
    assert out["aurc"] == pytest.approx(total / n, abs=1e-12)
    c = correct.sum()
    star = sum(max(0, k - c) / k for k in range(1, n + 1)) / n
    assert out["e_aurc"] == pytest.approx(total / n - star, abs=1e-12)


def test_check_criteria_on_known_ece(released, toy):
    checked = evaluate_config(Engine(), released.config, toy, "deploy", n_boot=20, device="cpu")
    fitted = rel.calibrator_of(released.config)
    from calibview.core.io.logits import read_split
    import torch

    d = read_split(toy, RUN, "deploy")
    ece = ece_direct(fitted.apply(torch.from_numpy(np.asarray(d.scores))).exp().numpy(), d.labels)
    assert checked.result.metrics["ece"].value == pytest.approx(ece, abs=1e-12)
    assert checked.fit_hash is True


def test_config_of_another_class_count_is_refused(released, tmp_path):
    other = write_toy(tmp_path / "k4.h5", k=4)
    with pytest.raises(CalibviewError, match="K = 3 classes"):
        evaluate_config(Engine(), released.config, other, "deploy", **FAST)


def test_drift_refit_links_the_parent_and_uses_seeded_halves(released, toy):
    d = drift(Engine(), released.config, toy, "shadow", run=RUN, max_ece_increase=0.0, refit=True, **FAST)
    assert d.drifted and d.ece_increase > 0
    ece = next(r for r in d.rows if r["metric"] == "ece")
    assert ece["delta"] == pytest.approx(ece["value"] - released.config["metrics"]["ece"])
    new = d.refit.config
    assert new["parent"] == released.config["config_sha256"]
    assert rel.verify_config(json.loads(rel.config_text(new)))
    fit, verify = rel.halves(600, released.config["settings"]["seed"])
    assert len(np.intersect1d(fit, verify)) == 0 and len(fit) + len(verify) == 600
    assert np.array_equal(fit, rel.halves(600, released.config["settings"]["seed"])[0])
    assert new["provenance"]["fit_sha256"] == _stored_sha(toy, "/net/toy/shadow", rows=fit)
    assert new["provenance"]["eval_sha256"] == _stored_sha(toy, "/net/toy/shadow", rows=verify)
    assert (new["provenance"]["n_fit"], new["provenance"]["n_eval"]) == (300, 300)
    assert new["thresholds"]["target_precision"] == 0.9
    assert rel.check_fit_hash(new, rel.matching_run(new, toy)) is True


def test_html_is_offline_embeds_the_figures_and_is_small(released):
    html = render(released, diagram_png=b"\x89PNG\r\n\x1a\nfake")
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert 'src="data:image/png;base64,' in html and "<svg" in html
    assert len(html.encode()) < 3 << 20
    for section in ("Acceptance checklist", "Metrics on deploy", "High-confidence audit", "Risk-coverage",
                    "Per-class errors", "Provenance", released.config["config_sha256"]):
        assert section in html
    assert '<th class="num">one-vs-rest ECE</th>' in html       # the window's Per class tab uses the same name
    assert "<svg" in render(released, None)              # without Qt: an SVG reliability diagram instead


def test_html_metrics_table_uses_the_windows_unit_convention(released):
    """The report's metrics read like the window's table (unit in the header, fixed precision)."""
    from calibview.core.reports import units
    html = render(released, diagram_png=b"\x89PNG\r\n\x1a\nfake")
    assert ">ECE %</td>" in html and ">CAL ×100</td>" in html
    r = released.evaluation.results[0]
    assert units.fmt("ece", r.metrics["ece"].value) in html
