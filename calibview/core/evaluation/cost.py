"""What a bootstrap will cost before it starts: an estimate of its time and of the memory its distributions
take, so a mistyped ``--n-boot 1000000000`` is refused or announced instead of running silently for days.

The time model is a sum of the three parts that grow with the resamples, each per calibrator: the sums over
samples (``R x units``), the class-wise product (``R x units x K``) and the per-resample grid work of SmoothECE and
CAL (``R``). Its rates were measured on the 2-core development machine (benchmarks/RESULTS.md: the 50,000 x 1,000
none+ts report spends ~2.5 s in the bootstrap and ~1.1 s in its class-wise products); a faster machine only
makes the estimate pessimistic. The memory is what the distributions keep: one float64 per metric, resample and
calibrator, the (R, units) uint8 counts the scoring pass holds (unless above their own budget), and the refinement
split's (N, 8) float32 per-sample coefficients of each calibrator (kept for its resamples).
"""

from __future__ import annotations

from dataclasses import dataclass

from calibview.core.errors import CalibviewError
from calibview.core.io import memory
from calibview.core.stats.metrics import METRIC_NAMES
from calibview.core.stats.resampling import MAX_UNITS, MIN_UNITS, UNIT_ENTRIES, UNIT_LIMIT

#: seconds per resample and resampling unit (sums over samples), per unit and class (class-wise product), and
#: per resample (SmoothECE and CAL grids), for one calibrator
RATE_SAMPLES, RATE_CLASSWISE, RATE_GRID = 2.5e-8, 1.1e-11, 4e-4
#: above this many seconds the CLI says what the bootstrap will cost and the window asks first
ANNOUNCE_S = 60.0
#: resample counts kept in memory while a split is scored ((n_boot, units) uint8); above, no class-wise interval
COUNTS_BUDGET = 512 << 20
#: rows of samples per step when the bootstrap's bin features are summed into resampling units
FEATURE_ROWS = 1 << 16


@dataclass(frozen=True)
class Cost:
    """The estimated bootstrap of one request: ``seconds`` of work on the development machine's rates and
    ``nbytes`` of memory it keeps."""

    seconds: float
    nbytes: int

    def describe(self) -> str:
        """'about 3 h and 1.2 GB' (for messages)."""
        s = self.seconds
        when = f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.0f} h" \
            if s < 172800 else f"{s / 86400:.0f} days"
        return f"about {when} and {memory.human(self.nbytes)}"


def bootstrap_cost(n: int, k: int, n_boot: int, n_calibrators: int) -> Cost:
    """The :class:`Cost` of ``n_boot`` resamples of an (n, k) evaluation split for ``n_calibrators``."""
    units = _units(n, k)
    r, c = float(n_boot), max(1, n_calibrators)
    seconds = c * (RATE_SAMPLES * r * units + RATE_CLASSWISE * r * units * k + RATE_GRID * r)
    counts = r * units if r * units <= COUNTS_BUDGET else 0        # above its budget the matrix is not kept
    refinement = 32 * n if n_boot else 0                            # RefinementResult.coef, per calibrator
    nbytes = int(c * (len(METRIC_NAMES) * 8 * r + refinement) + counts)
    return Cost(seconds, nbytes)


def _units(n: int, k: int) -> int:
    """The resampling units of an (n, k) split: its samples, or groups of them above UNIT_LIMIT."""
    return n if n <= UNIT_LIMIT else int(min(MAX_UNITS, max(MIN_UNITS, UNIT_ENTRIES // max(k, 1))))


def bins_bytes(n: int, k: int, bins: int, n_boot: int, n_calibrators: int) -> tuple[int, str]:
    """(bytes, what) that ``bins`` bins cost an (n, k) evaluation per calibrator, summed: the (K, B) float64
    class-wise sums (twice: accumulated, then kept) and, with a bootstrap, the features the binned metrics are
    resampled from ((rows, 6 B) float64 and their float32 copy; rows = the samples, or the units plus one slice
    of FEATURE_ROWS samples)."""
    c = max(1, n_calibrators)
    sums = 2 * 8 * k * bins
    what = f"class-wise sums of {k:,} classes x {bins:,} bins"
    features = 0
    if n_boot:
        rows = n if n <= UNIT_LIMIT else _units(n, k) + FEATURE_ROWS
        features = rows * 6 * bins * 12
        what += f" and bootstrap features of {rows:,} rows x {6 * bins:,} columns"
    return c * (sums + features), what


def check_bins(n: int, k: int, bins, n_boot: int, n_calibrators: int, budget: int) -> None:
    """Refuse, with one sentence giving the estimate, bin counts (an int or a sequence) whose arrays would take
    more than ``budget`` bytes (see :func:`bins_bytes`), before anything is allocated."""
    for b in ([bins] if isinstance(bins, int) else bins):
        nbytes, what = bins_bytes(n, k, int(b), n_boot, n_calibrators)
        if nbytes > budget:
            boot = f" with --n-boot {n_boot}" if n_boot else ""
            raise CalibviewError(f"--bins {int(b)}{boot} would take about {memory.human(nbytes)} ({what}, for "
                                 f"{max(1, n_calibrators)} calibrator(s)), more than the {memory.human(budget)} "
                                 f"memory budget (--max-memory); use fewer bins.")


def budget(max_memory) -> int:
    """The bytes a bootstrap's kept results may take: the request's ``max_memory`` (a split's streaming
    threshold, None for the default), but never less than the default threshold (a small --max-memory streams a
    split; it does not forbid a normal bootstrap)."""
    return max(max_memory or 0, memory.DEFAULT_MAX_MEMORY)


def check_bootstrap(cost: Cost, budget: int, n_boot: int) -> None:
    """Refuse, with one sentence, a bootstrap whose kept memory exceeds ``budget`` bytes (see :func:`budget`)."""
    if cost.nbytes > budget:
        raise CalibviewError(f"--n-boot {n_boot} would keep {memory.human(cost.nbytes)} of resampled metrics "
                             f"(more than the {memory.human(budget)} memory budget, --max-memory); lower --n-boot.")
