"""Proper scores and calibration errors, exactly as defined in docs/DEFINITIONS.md.

Everything is computed from *log-probabilities* in float64, so a confidence of exactly 1.0 only appears when the
model really says so, and NLL is ``inf`` (never clipped) when a calibrator outputs an exact zero for the label.

The expensive input is the (N, K) matrix; it is reduced once, by :func:`sample_stats`, to per-sample vectors
(confidence, correctness, NLL, Brier) plus the per-class bin sums that class-wise ECE needs. Every metric below is
then a cheap function of those, which is what makes 1000-resample bootstrap intervals affordable (see
:mod:`calibview.core.stats.bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Sequence, Union

import numpy as np
import torch

from calibview.core.stats.rowwise import entries_above, row_argmax

#: Metric columns in the order of ``metrics.csv`` (values are plain fractions, not percent).
METRIC_NAMES = (
    "accuracy", "nll", "brier", "brier_top", "ece", "rmsce", "mce", "ace", "classwise_ece",
    "debiased_ece", "smece", "cal", "tot", "sharpness_gap",
    # selective prediction and discrimination (stats.selective, stats.auroc), appended: positional readers work
    "aurc", "e_aurc", "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95", "cov_at_acc99", "auroc",
    "auroc_correct",
    # bandwidth-free (stats.corp): the CORP decomposition, the calibration tests' p-values, the refinement split
    "corp_mcb", "corp_dsc", "corp_unc", "corp_mcb_log", "corp_dsc_log", "corp_unc_log", "p_ece", "p_skce",
    "nll_refinement", "nll_calibration", "brier_refinement", "brier_calibration",
)

#: the metrics that have no interval by definition (p-values): their ``_lo`` / ``_hi`` are empty in every record
NO_INTERVAL = ("p_ece", "p_skce")

#: One-line conventions shown in the UI, the CLI help and the CSV documentation.
METRIC_HELP = {
    "accuracy": "fraction of samples whose arg-max is the label",
    "nll": "mean -log p_y from float64 log-softmax, no clipping (inf when a calibrator outputs p_y = 0)",
    "brier": "full-vector Brier, mean sum_k (p_k - 1[y=k])^2, range [0, 2]",
    "brier_top": "top-label Brier, mean (conf - correct)^2",
    "ece": "top-label ECE, equal-width bins lo < conf <= hi, weighted by bin mass",
    "rmsce": "root of the bin-mass-weighted mean squared gap, equal-width bins",
    "mce": "largest |accuracy - confidence| over non-empty equal-width bins",
    "ace": "top-label ECE over equal-mass bins (sorted confidences split into nearly equal groups)",
    "classwise_ece": "mean over classes of the equal-width ECE of p_k against 1[y=k] (Kull et al. 2019)",
    "debiased_ece": "debiased L2 ECE over equal-mass bins (Kumar et al. 2019), clipped at 0, square-rooted",
    "smece": "SmoothECE of relplot 1.0.3 (reflected Gaussian kernel, fixed-point bandwidth)",
    "cal": "kernel calibration error mean (c_hat(conf) - conf)^2 (Chidambaram & Ge 2025)",
    "tot": "total loss: full-vector Brier",
    "sharpness_gap": "TOT - CAL: lower is sharper",
    "aurc": "area under the risk-coverage curve: sort by confidence descending, equal confidences enter together; "
            "r(k) = errors among the first k / k, taken at the end of each tie group and held across it; "
            "AURC = (1/N) sum_k r(k)",
    "e_aurc": "AURC - AURC*, AURC* with the same N and error count but every correct sample first "
              "(r*(k) = max(0, k - C)/k, C correct): the part of AURC due to the ranking",
    "acc_at_cov80": "selective accuracy of the ceil(0.8 N) most confident samples (the tie group that crosses "
                    "included whole)",
    "acc_at_cov90": "selective accuracy of the ceil(0.9 N) most confident samples (crossing tie group included)",
    "acc_at_cov95": "selective accuracy of the ceil(0.95 N) most confident samples (crossing tie group included)",
    "cov_at_acc95": "largest coverage k/N at a tie-group end whose selective accuracy is >= 95 % (0 if none)",
    "cov_at_acc99": "largest coverage k/N at a tie-group end whose selective accuracy is >= 99 % (0 if none)",
    "auroc": "macro one-vs-rest ROC AUC of the class probabilities over the classes with both positives and "
             "negatives (K = 2: the AUC of p_1); ties count 1/2; as sklearn roc_auc_score(multi_class='ovr', "
             "average='macro') when every class is present",
    "auroc_correct": "ROC AUC of the confidence as a predictor of correctness (ties count 1/2)",
    "corp_mcb": "CORP miscalibration of the top-label Brier score: mean (conf - correct)^2 minus that of the PAV "
                "(isotonic) recalibration of conf (Dimitriadis et al. 2021); brier_top = MCB - DSC + UNC",
    "corp_dsc": "CORP discrimination: UNC minus the PAV-recalibrated top-label Brier score",
    "corp_unc": "CORP uncertainty: the top-label Brier score of the constant accuracy, acc (1 - acc)",
    "corp_mcb_log": "CORP miscalibration of the top-label log score (K = 2 only, where that score is the NLL)",
    "corp_dsc_log": "CORP discrimination of the log score (K = 2 only)",
    "corp_unc_log": "CORP uncertainty of the log score: binary entropy of the accuracy, nats (K = 2 only)",
    "p_ece": "p-value of the consistency-resampling test of the ECE (correctness redrawn as Bernoulli(conf), "
             "n_boot draws, seeded; at least 1/(n_boot + 1)); no interval",
    "p_skce": "p-value of the SKCE kernel calibration test (Widmann et al. 2019): the quadratic estimator with a "
              "resampled p-value up to 4,096 samples, the linear one with its normal p-value above "
              "(p_skce_method); no interval",
    "nll_refinement": "NLL after a temperature fitted on the evaluation split itself (in-sample, not a calibrator)",
    "nll_calibration": "nll - nll_refinement (>= 0): what temperature scaling on these samples would remove",
    "brier_refinement": "full Brier at the NLL's temperature fitted on the evaluation split (nll_refinement's)",
    "brier_calibration": "brier - brier_refinement: what that temperature removes from the Brier score (usually "
                         ">= 0; negative when it does not lower the Brier score)",
}

Bins = Union[int, str]


def resolve_bins(bins: Bins, n: int) -> int:
    """Bin count: an int >= 1, or ``"auto"`` (N < 10k: 10, 10k-100k: 15, > 100k: 20)."""
    if isinstance(bins, str):
        if bins.strip().lower() != "auto":
            try:
                bins = int(bins)
            except ValueError:
                raise ValueError(f"bins must be a positive integer or 'auto', not {bins!r}") from None
        else:
            return 10 if n < 10_000 else (15 if n <= 100_000 else 20)
    if int(bins) < 1:
        raise ValueError(f"bins must be a positive integer or 'auto', not {bins!r}")
    return int(bins)


def equal_width_bin(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each value for ``n_bins`` equal-width bins with ``lo < v <= hi``; 0 goes to the first bin.

    The edges are ``np.linspace(0, 1, n_bins + 1)`` and membership is decided by comparison with them (not by
    ``ceil(v * B)``, which misplaces values such as 0.4 * 15), as in Guo et al.'s ``_ECELoss``.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype != np.float64 or not np.isfinite(values).all():
        return np.clip(np.searchsorted(edges, values, side="left") - 1, 0, n_bins - 1)
    # searchsorted took 1.1 ms for 50,000 values; the count of edges below a value is ceil(v * B) up to one either
    # way (v * B rounds), so a guess and one comparison with each neighbouring edge give the same index (0.2 ms)
    cnt = np.ceil(np.clip(values, -1.0, 2.0) * n_bins).astype(np.int64)
    np.clip(cnt, 1, n_bins, out=cnt)
    cnt -= edges[cnt - 1] >= values         # the edge just below the guess is not below the value
    cnt += edges[cnt] < values              # the edge at the guess is below the value
    return np.clip(cnt - 1, 0, n_bins - 1)


def equal_mass_count(n: int, n_bins: int) -> int:
    """The number of equal-mass groups of ``n`` samples asked for ``n_bins``: no more groups than samples, at
    least one."""
    return max(1, min(int(n_bins), int(n)))


def equal_mass_groups(n: int, n_bins: int) -> np.ndarray:
    """Group index (0..B-1) of each position in sorted order: ``np.array_split`` sizes (first groups one larger)."""
    n_bins = equal_mass_count(n, n_bins)
    sizes = np.full(n_bins, n // n_bins)
    sizes[: n % n_bins] += 1
    return np.repeat(np.arange(n_bins), sizes)


@dataclass(frozen=True)
class SampleStats:
    """Per-sample reductions of one (N, K) probability matrix; all arrays float64 (N,) on the CPU."""

    conf: np.ndarray        # top-label confidence max_k p_k
    pred: np.ndarray        # arg-max (int64)
    correct: np.ndarray     # 1.0 where pred == label
    nll: np.ndarray         # -log p_y (may be inf)
    brier: np.ndarray       # sum_k (p_k - 1[y=k])^2
    labels: np.ndarray      # int64
    k: int
    classwise_sums: np.ndarray   # (K, B) sum over samples in bin b of (p_k - 1[y=k]), equal-width bins of p_k
    classwise_bins: int

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.conf.shape[0])

    @cached_property
    def conf_order(self) -> np.ndarray:
        """(N,) stable ascending order of ``conf``, shared by equal-mass bins, risk-coverage and CORP (0.1 s a sort at
        N = 1,000,000)."""
        return np.argsort(self.conf, kind="stable")


def sample_stats(log_probs: torch.Tensor, labels: torch.Tensor, *, n_bins: int, transform=None,
                 on_chunk=None, chunk_rows: int = 4096) -> SampleStats:
    """Reduce calibrated log-probabilities to :class:`SampleStats`, streaming over row chunks.

    log_probs : (N, K) float64 tensor (any device), rows log-normalised; or, with ``transform``, any (N, K)
        scores that ``transform(chunk)`` maps to float64 log-probabilities (a fitted calibrator's ``apply``),
        so the (N, K) float64 matrix never exists in memory at once.
    labels : (N,) int64 tensor on the same device.
    on_chunk : optional ``on_chunk(start, log_probs, probs, labels)`` (chunks) for other per-chunk consumers;
        it may modify ``probs`` in place (it is not used again).
    """
    n, k = log_probs.shape
    acc = StatsAccumulator(n, k, n_bins, log_probs.device)
    for start in range(0, n, chunk_rows):
        lp = log_probs[start:start + chunk_rows]
        acc.add(start, transform(lp) if transform is not None else lp, labels[start:start + chunk_rows],
                on_chunk)
    return acc.result(labels)


#: float64 bytes per (rows, K) chunk temporary: 16 MB. Temporaries near glibc's 32 MB mmap threshold fragment the
#: heap (the peak of a 50,000 x 1,000 report rose by 0.5 GB with 4,096-row chunks).
CHUNK_BYTES = 16 << 20


def chunk_rows(k: int) -> int:
    """Rows per chunk for K classes: float64 (rows, K) temporaries of about CHUNK_BYTES, 16 to 4,096 rows."""
    return max(16, min(4096, CHUNK_BYTES // (8 * max(k, 1))))


def top_label(scores: torch.Tensor, labels: torch.Tensor, rows: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correctness) float64 (N,) straight from (N, K) logits or log-probabilities, for the top-label
    metrics alone: conf = 1 / sum_k exp(z_k - max_k z) in float64, one exp pass over chunks of rows."""
    n, k = scores.shape
    rows = rows or chunk_rows(k)
    conf = torch.empty(n, dtype=torch.float64)
    correct = torch.empty(n, dtype=torch.float64)
    # One float64 buffer reused in place: fresh 16 MB temporaries per chunk cost more in page faults than the
    # arithmetic (3x the time at 50,000 x 1,000).
    buf = torch.empty((min(rows, n), k), dtype=torch.float64, device=scores.device)
    for start in range(0, n, rows):
        z = scores[start:start + rows]
        pred = row_argmax(z)
        b = buf[:z.shape[0]]
        b.copy_(z).sub_(z.gather(1, pred[:, None])).exp_()
        conf[start:start + rows] = b.sum(1).cpu()
        correct[start:start + rows] = (pred == labels[start:start + rows]).to(torch.float64).cpu()
    return conf.reciprocal_().numpy(), correct.numpy()


def top_label_ece(scores: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> float:
    """Top-label ECE (equal-width bins, lo < conf <= hi) straight from (N, K) logits: the single-metric path."""
    conf, correct = top_label(scores, labels)
    w = equal_width_table(conf, correct, n_bins)
    return float(ece_from_sums(w.count, w.sum_conf, w.sum_correct, conf.shape[0])[0])


class _Entries:
    """The class-wise entries (row, class, p, is-label) of a :class:`StatsAccumulator`, appended in place to four
    1-D tensors that grow by half when full, from a first capacity estimated for the whole split.

    Why not a list of per-chunk pieces: those small long-lived tensors landed in the holes the chunks' (rows, K)
    temporaries left in the heap, so the next chunk's temporaries no longer fitted there and the heap grew; in two
    of three seeds a streamed 500,000 x 1,000 report's heap reached 6-7 GB (for 0.3 GB in use) and page-faulted
    1.6-1.9 million times before its AUROC pass, against 0.3-0.4 GB and 0.12 million faults without the pieces."""

    DTYPES = (torch.int64, torch.int64, torch.float64, torch.bool)

    def __init__(self, device: torch.device) -> None:
        self.device, self.count = device, 0
        self.cols: Optional[list[torch.Tensor]] = None

    def append(self, parts: Sequence[torch.Tensor], expect: int = 0) -> None:
        """Append four equal-length 1-D tensors (row, class, p, is-label); ``expect``: the total entries expected,
        read for the first capacity only (a later dense chunk must not size the buffer for a whole dense split)."""
        m = int(parts[0].shape[0])
        if not m:
            return
        need = self.count + m
        cap = 0 if self.cols is None else int(self.cols[0].shape[0])
        if need > cap:
            new = [torch.empty(max(need, int(expect) if self.cols is None else 0, cap + cap // 2), dtype=d,
                               device=self.device)
                   for d in self.DTYPES]
            for old, fresh in zip(self.cols or (), new):
                fresh[:self.count] = old[:self.count]
            self.cols = new
        for col, part in zip(self.cols, parts):
            col[self.count:need] = part
        self.count = need

    def views(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The entries so far, in the order appended (views)."""
        if self.cols is None:
            return tuple(torch.zeros(0, dtype=d, device=self.device) for d in self.DTYPES)
        return tuple(c[:self.count] for c in self.cols)


class StatsAccumulator:
    """Builds :class:`SampleStats` from consecutive chunks of rows, so a split never has to be in memory at once
    (only the per-sample vectors, O(N), and the class-wise entries below are kept).

    Class-wise sums for several bin counts come from one pass: every entry starts in the first bin (a per-class
    total of ``p - y``), and the few entries with ``p > 1/B`` for the largest requested ``B`` (fewer than ``B``
    per row) are kept as a sparse list (row, class, p, is-label), from which :meth:`classwise_sums` moves them to
    their bin for any requested ``B``: O(N K) flops, O(N B) memory.
    """

    def __init__(self, n: int, k: int, bins: int | Sequence[int], device: torch.device | str = "cpu") -> None:
        dev = torch.device(device)
        self.bins = tuple(sorted({int(b) for b in ((bins,) if isinstance(bins, (int, np.integer)) else bins)}))
        self.n, self.k, self.n_bins = n, k, self.bins[0]
        # The same threshold as equal_width_bin's first edge (np.linspace and torch.linspace differ in the last bit).
        self.threshold = float(np.linspace(0.0, 1.0, self.bins[-1] + 1)[1])
        self.conf = torch.empty(n, dtype=torch.float64, device=dev)
        self.pred = torch.empty(n, dtype=torch.int64, device=dev)
        self.nll = torch.empty(n, dtype=torch.float64, device=dev)
        self.brier = torch.empty(n, dtype=torch.float64, device=dev)
        self.total = torch.zeros(k, dtype=torch.float64, device=dev)
        self._entries = _Entries(dev)
        self._sums: dict[int, np.ndarray] = {}

    def add(self, start: int, lp: torch.Tensor, y: torch.Tensor, on_chunk=None) -> None:
        """Rows ``start .. start + len(lp)``: float64 log-probabilities and their labels. ``on_chunk(start, lp, p,
        y)`` runs last and may overwrite ``p``."""
        stop = start + lp.shape[0]
        p = lp.exp()
        arg = row_argmax(lp)
        self.conf[start:stop] = lp.gather(1, arg[:, None])[:, 0].exp()
        self.pred[start:stop] = arg
        lp_y = lp.gather(1, y[:, None])[:, 0]
        self.nll[start:stop] = -lp_y
        p_y = lp_y.exp()
        self.brier[start:stop] = (p * p).sum(dim=1) - 2.0 * p_y + 1.0
        self.total += p.sum(dim=0)
        self.total.index_add_(0, y, -torch.ones_like(p_y))
        rows, cols = entries_above(p, self.threshold)
        if rows.numel():
            # first capacity: this chunk's entries per row for every row, and a tenth more
            expect = (rows.numel() * self.n) // max(1, lp.shape[0]) * 11 // 10
            self._entries.append((rows + start, cols, p[rows, cols], y[rows] == cols), expect)
        if on_chunk is not None:
            on_chunk(start, lp, p, y)

    def entries(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(row, class, p, is-label) of every entry above the first edge of the largest bin count, in row order."""
        return self._entries.views()

    def classwise_sums(self, n_bins: int) -> np.ndarray:
        """(K, B) float64: per class and equal-width bin of p_k, the sum of ``p_k - 1[y = k]``."""
        if n_bins not in self.bins:
            raise ValueError(f"class-wise sums were accumulated for {self.bins} bins, not {n_bins}")
        if n_bins in self._sums:                 # asked by result(), the scored entry and the class-wise bootstrap
            return self._sums[n_bins]
        rows, cols, p, is_label = self.entries()
        edges = torch.from_numpy(np.linspace(0.0, 1.0, n_bins + 1)).to(p.device)
        big = p > edges[1]
        cols, p = cols[big], p[big]
        vals = p - is_label[big].to(torch.float64)
        b = (torch.searchsorted(edges, p, side="left") - 1).clamp_(0, n_bins - 1)
        sums = torch.zeros(self.k * n_bins, dtype=torch.float64, device=p.device)
        sums.index_add_(0, cols * n_bins + b, vals)
        sums.index_add_(0, cols * n_bins, -vals)
        sums = sums.view(self.k, n_bins)
        sums[:, 0] += self.total
        self._sums[n_bins] = sums.cpu().numpy()
        return self._sums[n_bins]

    def state(self) -> dict[str, np.ndarray]:
        """What this accumulator holds, as numpy arrays (per-sample conf, pred, nll, brier (n,); per-class
        ``total`` (K,); the sparse entries ``rows, cols, p, is_label``): to be sent from another process and added
        to a larger accumulator by :meth:`add_state`."""
        rows, cols, p, is_label = self.entries()
        return {"conf": self.conf.cpu().numpy(), "pred": self.pred.cpu().numpy(), "nll": self.nll.cpu().numpy(),
                "brier": self.brier.cpu().numpy(), "total": self.total.cpu().numpy(), "rows": rows.cpu().numpy(),
                "cols": cols.cpu().numpy(), "p": p.cpu().numpy(), "is_label": is_label.cpu().numpy()}

    def add_state(self, start: int, state: dict[str, np.ndarray]) -> None:
        """Rows ``start ..`` from another accumulator's :meth:`state` (same K and bin counts), as if they had been
        added here chunk by chunk (entries in row order: add the parts in row order)."""
        stop = start + state["conf"].shape[0]
        dev = self.conf.device
        for name in ("conf", "pred", "nll", "brier"):
            getattr(self, name)[start:stop] = torch.from_numpy(state[name]).to(dev)
        self.total += torch.from_numpy(state["total"]).to(dev)
        self._sums.clear()
        if state["rows"].size:
            rows, cols, p, is_label = (torch.from_numpy(state[f]).to(dev) for f in ("rows", "cols", "p", "is_label"))
            self._entries.append((rows + start, cols, p, is_label))

    def result(self, labels: torch.Tensor) -> SampleStats:
        """The statistics of all N rows (``labels`` (N,) int64, any device); class-wise sums of the smallest B."""
        labels = labels.to(self.pred.device)
        correct = (self.pred == labels).to(torch.float64)
        return SampleStats(
            conf=self.conf.cpu().numpy(), pred=self.pred.cpu().numpy(), correct=correct.cpu().numpy(),
            nll=self.nll.cpu().numpy(), brier=self.brier.cpu().numpy(), labels=labels.cpu().numpy(), k=self.k,
            classwise_sums=self.classwise_sums(self.n_bins), classwise_bins=self.n_bins,
        )


# --- binned calibration errors from sufficient statistics -----------------------------------------------------

@dataclass(frozen=True)
class BinTable:
    """Per-bin sufficient statistics of top-label confidence (equal-width or equal-mass)."""

    count: np.ndarray       # (B,) samples in the bin
    sum_conf: np.ndarray    # (B,)
    sum_correct: np.ndarray  # (B,)
    lo: np.ndarray          # (B,) bin lower edge (equal-mass: smallest confidence in the bin)
    hi: np.ndarray          # (B,) upper edge

    @property
    def n(self) -> float:
        """The number of samples over all bins."""
        return float(self.count.sum())

    @property
    def accuracy(self) -> np.ndarray:
        """(B,) mean correctness of each bin, NaN for an empty bin."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.sum_correct / np.maximum(self.count, 1), np.nan)

    @property
    def confidence(self) -> np.ndarray:
        """(B,) mean confidence of each bin, NaN for an empty bin."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.sum_conf / np.maximum(self.count, 1), np.nan)


def equal_width_table(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> BinTable:
    """The :class:`BinTable` of ``n_bins`` equal-width bins of [0, 1]; conf, correct : (N,) float64 in [0, 1]."""
    b = equal_width_bin(conf, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return BinTable(
        count=np.bincount(b, minlength=n_bins).astype(np.float64),
        sum_conf=np.bincount(b, weights=conf, minlength=n_bins),
        sum_correct=np.bincount(b, weights=correct, minlength=n_bins),
        lo=edges[:-1], hi=edges[1:],
    )


def equal_mass_order(conf: np.ndarray, n_bins: int, order: Optional[np.ndarray] = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(stable ascending order of the confidences (``order`` if given), group of each sorted position)."""
    order = np.argsort(conf, kind="stable") if order is None else order
    return order, equal_mass_groups(conf.shape[0], n_bins)


def equal_mass_table(conf: np.ndarray, correct: np.ndarray, n_bins: int, order: Optional[np.ndarray] = None
                     ) -> BinTable:
    """The :class:`BinTable` of (at most) ``n_bins`` equal-mass bins of the sorted confidences (ties kept in
    stable order); conf, correct : (N,) float64 in [0, 1]; ``order`` their stable ascending order, if known. Edges
    are the smallest and largest confidence of each bin."""
    order, group = equal_mass_order(conf, n_bins, order)
    b = np.empty_like(group)
    b[order] = group
    nb = int(group[-1]) + 1 if group.size else 0
    sc = conf[order]
    first = np.searchsorted(group, np.arange(nb), side="left")
    last = np.searchsorted(group, np.arange(nb), side="right") - 1
    return BinTable(
        count=np.bincount(b, minlength=nb).astype(np.float64),
        sum_conf=np.bincount(b, weights=conf, minlength=nb),
        sum_correct=np.bincount(b, weights=correct, minlength=nb),
        lo=sc[first], hi=sc[last],
    )


def ece_from_sums(count, sum_conf, sum_correct, n):
    """ECE, RMSCE and MCE from per-bin sums; arrays may carry leading batch dimensions (bins last)."""
    count = np.asarray(count, dtype=np.float64)
    gap = np.asarray(sum_correct, dtype=np.float64) - np.asarray(sum_conf, dtype=np.float64)
    nonempty = count > 0
    safe = np.where(nonempty, count, 1.0)
    ece = np.abs(gap).sum(axis=-1) / n
    rmsce = np.sqrt(np.where(nonempty, gap * gap / safe, 0.0).sum(axis=-1) / n)
    mce = np.where(nonempty, np.abs(gap) / safe, 0.0).max(axis=-1)
    return ece, rmsce, mce


def debiased_from_sums(count, sum_conf, sum_correct, n):
    """Kumar et al.'s debiased L2 calibration error (square-rooted, clipped at 0) from per-bin sums."""
    count = np.asarray(count, dtype=np.float64)
    ok = count >= 2
    safe = np.where(ok, count, 2.0)
    f = np.asarray(sum_conf) / safe
    y = np.asarray(sum_correct) / safe
    term = (f - y) ** 2 - y * (1.0 - y) / (safe - 1.0)
    sq = np.where(ok, count * term, 0.0).sum(axis=-1) / n
    return np.sqrt(np.maximum(sq, 0.0))


def binned_metrics(conf: np.ndarray, correct: np.ndarray, n_bins: int, order: Optional[np.ndarray] = None
                   ) -> dict[str, float]:
    """ECE, RMSCE, MCE (equal-width) and ACE, debiased ECE (equal-mass) of top-label confidence (``order``: the
    confidences' stable ascending order, if known)."""
    n = conf.shape[0]
    w = equal_width_table(conf, correct, n_bins)
    ece, rmsce, mce = ece_from_sums(w.count, w.sum_conf, w.sum_correct, n)
    m = equal_mass_table(conf, correct, n_bins, order)
    ace, _, _ = ece_from_sums(m.count, m.sum_conf, m.sum_correct, n)
    deb = debiased_from_sums(m.count, m.sum_conf, m.sum_correct, n)
    return {"ece": float(ece), "rmsce": float(rmsce), "mce": float(mce), "ace": float(ace),
            "debiased_ece": float(deb)}


def classwise_ece(stats: SampleStats) -> tuple[float, np.ndarray]:
    """(mean over classes, per-class ECE (K,)) from the class-wise bin sums."""
    per_class = np.abs(stats.classwise_sums).sum(axis=1) / stats.n
    return float(per_class.mean()), per_class


def wilson_interval(successes: np.ndarray, n: np.ndarray, z: float = 1.959963984540054):
    """Wilson score interval for per-bin accuracy (does not collapse on all-correct bins, unlike the bootstrap)."""
    successes = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    safe = np.maximum(n, 1.0)
    p = successes / safe
    denom = 1.0 + z * z / safe
    centre = (p + z * z / (2 * safe)) / denom
    half = z * np.sqrt(p * (1 - p) / safe + z * z / (4 * safe * safe)) / denom
    lo = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
    hi = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return lo, hi


def per_class_accuracy(stats: SampleStats) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy on the samples of each true class (recall), count of each class), both (K,)."""
    count = np.bincount(stats.labels, minlength=stats.k).astype(np.float64)
    hits = np.bincount(stats.labels, weights=stats.correct, minlength=stats.k)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(count > 0, hits / np.maximum(count, 1), np.nan)
    return acc, count
