"""The figures of regression runs. ``rows`` draws one recalibrator's row: the regression calibration-sharpness
diagram, interval coverage, the PIT histogram and the quantile calibration curve. ``figures`` stacks those rows
into regression.png of a report (or, with the figure options, regression.<format>, and the window's grid export).
The window's regression view draws through ``canvas`` (the diagram, its curve cached per bandwidth, or the grid of
rows) and ``panels`` (coverage, PIT and quantile curves of every recalibrator in one dock tab). All of them are
built of the themed pieces in ``items``."""

from calibview.plot.regression.figures import regression_figure, regression_png

__all__ = ["regression_figure", "regression_png"]
