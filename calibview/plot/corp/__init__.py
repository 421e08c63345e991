"""The bandwidth-free CORP views (pyqtgraph): the PAV step curve with its consistency and bootstrap bands as items
of a calibrator's curve (``items``: drawn over the canvas's overlay, in the grid's panels and in every export),
and the MCB-DSC plot of the Brier score's decomposition with its iso-score lines (``mcb_dsc``: the window's tab
and ``calibview report``'s mcb_dsc.png), and the one-vs-rest diagram of a chosen class with its CORP steps
(``class_figure``: report's corp_class_<class>.png and the window's Class CORP tab). Everything numeric comes from
calibview.core.stats.corp and calibview.core.reports.corp_class."""
