"""The defaults of an evaluation, each defined once here as a plain constant: the fields of
:class:`calibview.core.evaluation.request.EvalRequest` and the settings of the slices
(:func:`calibview.core.evaluation.slices.evaluate_slices`, which the release and its checklist share).

This module imports nothing, so the command line can show these values in ``--help`` without loading numpy or
torch. The streaming threshold (EvalRequest's ``max_memory=None``) is
:data:`calibview.core.io.memory.DEFAULT_MAX_MEMORY`.
"""

#: the split the metrics are computed on
EVAL_SPLIT = "test"
#: the split the calibrators are fitted on
FIT_SPLIT = "val"
#: the calibrators evaluated: the uncalibrated baseline and temperature scaling
CALIBRATORS = ("none", "ts")
#: every registered calibrator, in the registry's order (a test keeps it equal to the registry), so that an
#: unknown name is refused before torch loads
KNOWN_CALIBRATORS = ("none", "ts", "ts-grid", "hb", "ir", "platt", "beta", "mrr", "vs", "ms", "dirichlet")
#: equal-width bins of the binned metrics (or "auto")
BINS = 15
#: bootstrap resamples per interval (0: no intervals)
N_BOOT = 1000
#: the bootstrap's seed
SEED = 0
#: the intervals' level, in (0, 1)
LEVEL = 0.95
#: how intervals are read off the resamples: auto (BCa for the binned calibration errors, percentile for the
#: rest), or percentile, basic or bca for every metric (calibview.core.stats.intervals)
INTERVAL = "auto"
INTERVALS = ("auto", "percentile", "basic", "bca")
#: the kernel bandwidth of the diagram and of CAL, on the confidence scale [0, 1]
BANDWIDTH = 0.05
#: the kernel of the diagram and of CAL: gaussian or epanechnikov
KERNEL = "gaussian"
#: where the tensors live: cpu, cuda or auto
DEVICE = "auto"
#: quantile groups a float metadata column is sliced into
SLICE_BINS = 4
#: the smallest slice (samples) that gets intervals and a flag, or that the checklist counts
MIN_SLICE = 30
#: conformal prediction sets (calibview conformal): the split qhat is taken on, the miscoverage level, the scores
#: and RAPS's penalty (calibview.core.stats.conformal holds the same values; a test keeps them equal)
CALIB_SPLIT = "val"
ALPHA = 0.1
CONFORMAL_SCORES = ("lac", "aps", "raps")
RAPS_LAMBDA = 0.01
RAPS_KREG = 5
