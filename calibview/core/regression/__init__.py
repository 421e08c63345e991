"""Regression runs: the metrics of predictive distributions (:mod:`.metrics`, on the per-form quantities of
:mod:`.forms`), the Nadaraya-Watson calibration-sharpness decomposition (:mod:`.kernel`), the recalibrators
(:mod:`.recalibrators`), the evaluation of a run with bootstrap intervals and the data the figures draw
(:mod:`.evaluate`), and the rows of metrics.csv, regression.csv and calibrators.json (:mod:`.records`).
numpy and scipy only: nothing here loads torch until an interval is read off its resamples."""
