"""One evaluation from request to result: the request and its validation (``request``, torch-free), the device
and the scores as tensors (``tensors``), the immutable results (``results``) and their flat records
(``records``), the engine (``engine``: ``Engine``, ``evaluate``) over its cacheable stages (``stages``, run on a
``job``, cached in ``cache``), and the evaluations built on it: slices, domains, model comparison."""
