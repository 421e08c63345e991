"""One evaluation from request to result: the request types and their validation (``request``), the engine and
its cacheable stages (``engine``, ``stages``, ``cache``), and the evaluations built on it: slices, domains,
model comparison."""
