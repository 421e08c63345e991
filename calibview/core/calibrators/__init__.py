"""Post-hoc calibrators: the :class:`~calibview.core.calibrators.base.Method` protocol, the registry's storage and
the JSON form of a fitted calibrator (``base``), the identity and temperature scaling (``temperature``), the
binning family (hb, ir, mrr: ``binning``), the binary logistic maps (platt, beta: ``logistic``), the scaling family
(vs, ms, dirichlet: ``scaling``, fitted by ``scaling_fit``), the checks every scaling fit makes of its fit
split and result (``checks``), the lookup, fit and load functions over every family
(``registry``) and the calibrators.json file (``file``).

The registry's names (``fit``, ``get``, ``Fitted``, ``from_json``, ``configured``, ...) resolve here on first use,
so importing the package costs no torch."""


_SUBMODULES = frozenset({"base", "binning", "checks", "file", "logistic", "registry", "scaling", "scaling_fit",
                         "temperature"})


def __getattr__(name: str):
    if name in _SUBMODULES or name.startswith("__"):   # let the import system load submodules itself
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # The registry (every family registered) loads on first use, so importing the package costs no torch.
    from calibview.core.calibrators import registry

    try:
        return getattr(registry, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
