"""The figures of regression runs: ``figures`` draws regression.png of a report (or, with the figure options, regression.<format>) (the regression
calibration-sharpness diagram, interval coverage, the PIT histogram and the quantile calibration curve per
recalibrator); the window's regression view draws through ``canvas`` (the diagram, its curve cached per bandwidth)
and ``panels`` (coverage, PIT and quantile curves of every recalibrator), both built of the themed pieces in
``items``."""

from calibview.plot.regression.figures import regression_figure, regression_png

__all__ = ["regression_figure", "regression_png"]
