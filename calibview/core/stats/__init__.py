"""The statistics of calibration and sharpness: binned metrics and their sufficient statistics, SmoothECE, the
kernel calibration-sharpness estimator and its grid, the bootstrap, AUROC, selective prediction (risk-coverage,
thresholds), paired and independent deltas, and the positive-class view of binary runs.

Pure functions over arrays and tensors, no files. Import the modules themselves; this package imports nothing."""
