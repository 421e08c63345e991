"""The bucketed AUROC counter against scikit-learn and a brute-force pair count, on the inputs that exercise each
of its paths: continuous probabilities (few entries share a bucket with a positive), heavy ties (histogram-binning
style values and exact zeros: the whole-chunk path), coarse buckets (many positives per bucket: the exact rank
search), a class with one positive and classes with none."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from calibview.core.stats import auroc as au


def _softmax(rng, n, k, scale=3.0):
    z = rng.standard_normal((n, k)) * scale
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def _brute(p, y):
    """Mean over classes with positives and negatives of P(p_pos > p_neg) + 1/2 P(tie), by a pair loop."""
    out = []
    for c in range(p.shape[1]):
        pos, neg = p[y == c, c], p[y != c, c]
        if pos.size and neg.size:
            gt = (pos[:, None] > neg[None, :]).sum()
            eq = (pos[:, None] == neg[None, :]).sum()
            out.append((gt + 0.5 * eq) / (pos.size * neg.size))
    return float(np.mean(out))


_OWN = {"labels": False}


@pytest.fixture(autouse=True, params=[False, True], ids=["compared", "own-counts"])
def own_counts(request):
    """Every test twice: chunks counted without their labels (every entry compared), and with them (the
    positives' own counts read from the counter's sorted positives)."""
    _OWN["labels"] = request.param
    yield request.param


def _counted(p, y, chunk, labels=None):
    labels = _OWN["labels"] if labels is None else labels
    pt, yt = torch.from_numpy(p), torch.from_numpy(y)
    counter = au.AurocCounter(y, au.positives(pt, yt), p.shape[1])
    order = np.random.default_rng(0).permutation(range(0, len(p), chunk))      # chunks in any order
    for a in order:
        if labels:
            counter.add(pt[a:a + chunk], y[a:a + chunk], int(a))
        else:
            counter.add(pt[a:a + chunk])
    return counter


@pytest.mark.parametrize("kind", ["continuous", "rounded", "binned"])
@pytest.mark.parametrize("k", [9, 60])
def test_own_counts_give_the_same_integers_as_comparing(kind, k, monkeypatch):
    """The positives' own counts, read by row, are exactly what comparing their entries counts (k = 60 on 200
    rows: the scored classes' columns are gathered); small tables, so that positives share buckets."""
    monkeypatch.setattr(au, "TABLE_ENTRIES", 512)
    monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", 512)
    monkeypatch.setattr(au, "SEARCH_ABOVE", 1e-12)
    rng = np.random.default_rng(k)
    n = 200 if k == 60 else 900
    p = _softmax(rng, n, k)
    if kind == "rounded":
        p = np.round(p, 2)
    elif kind == "binned":
        p = np.floor(p * 8) / 8
    y = rng.integers(0, k if k == 9 else 20, n)              # k = 60: 40 classes without positives
    a, b = _counted(p, y, 64, labels=False), _counted(p, y, 64, labels=True)
    assert (a.cols is not None) == (k == 60)
    np.testing.assert_array_equal(a.gt, b.gt)
    np.testing.assert_array_equal(a.eq, b.eq)
    assert b.value() == pytest.approx(_brute(p, y), abs=1e-12)


@pytest.mark.parametrize("kind", ["continuous", "rounded", "zeros", "binned"])
@pytest.mark.parametrize("table", [1 << 20, 64, "search"])
def test_counter_against_sklearn_and_pairs(kind, table, monkeypatch):
    if table == "search":                                    # the binary-search path of many positives per class
        monkeypatch.setattr(au, "SEARCH_ABOVE", 1e12)
        monkeypatch.setattr(au, "PAD_ENTRIES", 200)          # several batches of classes
    else:                                                    # 64: a handful of buckets, many positives in each
        monkeypatch.setattr(au, "TABLE_ENTRIES", table)
        monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", table)
        monkeypatch.setattr(au, "SEARCH_ABOVE", 1e-12)
    rng = np.random.default_rng(hash((kind, table)) % 2**32)
    n, k = 700, 9
    p = _softmax(rng, n, k)
    if kind == "rounded":
        p = np.round(p, 2)
    elif kind == "zeros":
        p = np.where(p < 0.05, 0.0, p)
    elif kind == "binned":                                  # few distinct values per column
        p = np.floor(p * 8) / 8 + 1e-3 * np.arange(k)[None, :]
    y = rng.integers(0, k, n)
    counter = _counted(p, y, 97)
    assert (counter.batches is not None) == (table == "search")
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(k)])
    assert counter.value() == pytest.approx(ref, abs=1e-12)
    assert counter.value() == pytest.approx(_brute(p, y), abs=1e-12)


@pytest.mark.parametrize("kind", ["continuous", "rounded", "zeros"])
def test_many_positives_widen_the_table_instead_of_searching(kind, monkeypatch):
    """Positives too many for the cache-sized table: the table grows (up to WIDE_TABLE_ENTRIES) rather than
    falling back to binary searches, with the same counts as scikit-learn; beyond the widest table, searches."""
    monkeypatch.setattr(au, "TABLE_ENTRIES", 256)            # 28 buckets per class: far too few for 2,000 positives
    monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", 1 << 17)
    rng = np.random.default_rng(21)
    n, k = 2000, 9
    p = _softmax(rng, n, k)
    if kind == "rounded":
        p = np.round(p, 3)
    elif kind == "zeros":
        p = np.where(p < 0.05, 0.0, p)
    y = rng.integers(0, k, n)
    counter = _counted(p, y, 131)
    assert counter.batches is None and counter.nb > 256 // k and counter.table.size <= 1 << 17
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(k)])
    assert counter.value() == pytest.approx(ref, abs=1e-12)
    monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", 256)       # no room to widen: the binary searches
    searched = _counted(p, y, 131)
    assert searched.batches is not None
    np.testing.assert_array_equal(searched.gt, counter.gt)
    np.testing.assert_array_equal(searched.eq, counter.eq)


def test_one_positive_no_positive_and_binary(monkeypatch):
    rng = np.random.default_rng(5)
    p = _softmax(rng, 300, 5)
    y = rng.integers(0, 4, 300)            # class 4 has no positive: left out of the mean (the defined fallback)
    y[y == 3] = 0
    y[17] = 3                              # class 3 has exactly one
    got = au.auroc(p, y)
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(4)])
    assert got == pytest.approx(ref, abs=1e-12)
    per_class = _counted(p, y, 50).per_class()
    assert np.isnan(per_class[4])
    assert per_class[3] == pytest.approx(roc_auc_score(y == 3, p[:, 3]), abs=1e-12)
    # K = 2: the plain AUC of p_1
    p2 = _softmax(rng, 400, 2)
    y2 = rng.integers(0, 2, 400)
    assert au.auroc(np.round(p2, 3), y2) == pytest.approx(roc_auc_score(y2, np.round(p2, 3)[:, 1]), abs=1e-12)
    # a single class present: no class has negatives
    assert np.isnan(au.auroc(p, np.zeros(300, np.int64)))


def test_values_a_float32_rounding_cannot_tell_apart():
    """Positives and negatives that differ only beyond float32 precision share a bucket; the float64 comparison
    must still order them."""
    rng = np.random.default_rng(8)
    n, k = 400, 3
    base = rng.uniform(0.2, 0.4, n)
    p = np.stack([base, base + 1e-12 * rng.integers(-3, 4, n), 1 - 2 * base], 1)
    y = rng.integers(0, k, n)
    assert _counted(p, y, 64).value() == pytest.approx(_brute(p, y), abs=1e-12)


@pytest.mark.parametrize("kind", ["continuous", "rounded"])
@pytest.mark.parametrize("table", [1 << 20, "search"])
def test_more_classes_than_positives_counts_only_the_scored_columns(kind, table, monkeypatch):
    """Labels drawn from 40 of 300 classes (ImageNet-21k on a small test set): only the scored classes' columns are
    gathered and counted, and the AUROC is scikit-learn's mean over them."""
    if table == "search":
        monkeypatch.setattr(au, "SEARCH_ABOVE", 1e12)
    rng = np.random.default_rng(11)
    n, k = 500, 300
    p = _softmax(rng, n, k)
    if kind == "rounded":
        p = np.round(p, 3)
    y = rng.choice(rng.choice(k, 40, replace=False), n)
    counter = _counted(p, y, 64)
    assert counter.cols is not None and len(counter.cols) == len(np.unique(y)) == counter.gt.shape[0]
    scored = np.unique(y)
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in scored])
    assert counter.value() == pytest.approx(ref, abs=1e-12)
    per = counter.per_class()
    assert np.isnan(np.delete(per, scored)).all()
    np.testing.assert_allclose(per[scored], [roc_auc_score(y == c, p[:, c]) for c in scored], rtol=0, atol=1e-12)


@pytest.mark.parametrize("entries, searched", [(16_000, False), (6_000, True)])
def test_table_or_search_by_buckets_per_positive(entries, searched, monkeypatch):
    """The widest table is used down to SEARCH_ABOVE (4) buckets per positive, with the counts of the searches and
    of scikit-learn: 2,000 positives in 9 classes, a table of 16,000 or 6,000 entries at most (its buckets are
    powers of two of float32 bit patterns, so it gets about 7.8 or 2 buckets per positive)."""
    monkeypatch.setattr(au, "TABLE_ENTRIES", 256)
    monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", entries)
    rng = np.random.default_rng(8)
    n, k = 2000, 9
    p = _softmax(rng, n, k)
    y = rng.integers(0, k, n)
    counter = _counted(p, y, 173)
    assert (counter.nb * k / n < au.SEARCH_ABOVE) == searched
    assert (counter.batches is not None) == searched
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(k)])
    assert counter.value() == pytest.approx(ref, abs=1e-12)
    monkeypatch.setattr(au, "SEARCH_ABOVE", 1e12)
    other = _counted(p, y, 173)
    assert other.batches is not None
    np.testing.assert_array_equal(other.gt, counter.gt)
    np.testing.assert_array_equal(other.eq, counter.eq)


@pytest.mark.parametrize("width", [1, 3, 8])
def test_multi_valued_buckets_by_their_own_values_and_by_rank_search(width, monkeypatch):
    """A bucket holding positives of different values compares an entry with those values when they are at most
    MULTI_WIDTH, else ranks it among all positives: with coarse buckets both kinds occur (width 1: none is
    small), and the counts equal scikit-learn's and a pair loop's."""
    monkeypatch.setattr(au, "MULTI_WIDTH", width)
    monkeypatch.setattr(au, "TABLE_ENTRIES", 512)            # ~85 buckets per class for ~250 positives each
    monkeypatch.setattr(au, "WIDE_TABLE_ENTRIES", 512)
    monkeypatch.setattr(au, "SEARCH_ABOVE", 1e-12)
    rng = np.random.default_rng(13)
    n, k = 1500, 6
    p = _softmax(rng, n, k)
    y = rng.integers(0, k, n)
    counter = _counted(p, y, 89)
    multi, count = counter._f_multi, counter._f_count
    assert bool((multi & (count <= width)).any()) == (width > 1)
    assert bool((multi & (count > width)).any())
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(k)])
    assert counter.value() == pytest.approx(ref, abs=1e-12)
    assert counter.value() == pytest.approx(_brute(p, y), abs=1e-12)
