"""The Python API for notebooks and scripts, on arrays: ``evaluate`` and its :class:`Result` (``evaluate``,
``result``), one-off metric functions (``metrics``), scikit-learn-style calibrators (``calibrators``) and logits
collected from a torch model (``collect``). ``import calibview`` exposes these names lazily (``calibview.ece``,
``calibview.evaluate``, ...), so importing the package costs no torch until one is used.

This layer sits beside the command line and the window: it uses the core and the figures, and nothing below
imports it."""

#: public name -> the submodule of calibview.api that defines it (resolved on first use)
EXPORTS: dict[str, str] = {
    "collect_logits": "collect",
}


def __getattr__(name: str):
    if name.startswith("__") or name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)


def __dir__():
    return sorted(list(globals()) + list(EXPORTS))
