"""Runs with members (ensembles, MC dropout) on top of the engine: the requests of the member rows
(:mod:`~calibview.core.evaluation.members.requests`) and the per-sample uncertainty decomposition with its
summaries and rankings (:mod:`~calibview.core.evaluation.members.uncertainty`).

Accessors for the window and the figures: ``uncertainty.of_evaluation(ev)`` gives an evaluation's per-sample
total entropy, aleatoric part and mutual information ((N,) float64, nats; None for a run without members),
``uncertainty.terciles(d)`` the (N,) low / mid / high epistemic tercile of each sample, and
``requests.member_requests`` the requests of the ensemble, the deterministic row and each member;
``terciles.tercile_split`` the ensemble's kernel curve per calibrator split by epistemic tercile (the diagram's
low / mid / high MI curves).
"""
