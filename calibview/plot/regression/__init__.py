"""The figures of regression runs: ``figures`` draws regression.png of a report (the regression
calibration-sharpness diagram, interval coverage, the PIT histogram and the quantile calibration curve per
recalibrator)."""

from calibview.plot.regression.figures import regression_png

__all__ = ["regression_png"]
