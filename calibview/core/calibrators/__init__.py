"""Post-hoc calibrators: the :class:`~calibview.core.calibrators.base.Method` protocol, the registry and the
JSON form of a fitted calibrator (``base``), temperature scaling (``temperature``), the scaling family (vs, ms,
dirichlet: ``scaling``), the binning family (hb, ir, platt, beta, mrr: ``binning``) and the calibrators.json file
(``file``)."""


_SUBMODULES = frozenset({"base", "binning", "file", "registry", "scaling", "temperature"})


def __getattr__(name: str):
    if name in _SUBMODULES or name.startswith("__"):   # let the import system load submodules itself
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # The registry (every family registered) loads on first use, so importing the package costs no torch.
    from calibview.core.calibrators import registry

    try:
        return getattr(registry, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
