"""The widgets of the window: one module per view (metrics table, calibrator panel, bandwidth bar, run browser,
compare, decisions, domains, slices, and a regression run's view and tables: ``regression_view``,
``regression_table``). A view shows what the session tells it and never computes."""
