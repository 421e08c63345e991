"""calibview: can your classifier's probabilities be trusted?

The Python API (``calibview.evaluate``, ``calibview.ece``, ``calibview.TemperatureScaling``, ...) lives in
:mod:`calibview.api`; its names resolve here on first use, so ``import calibview`` loads no torch."""

from calibview._version import __version__


def demo_path():
    """The bundled demo file (real CIFAR ResNet-110 logits; calibview/resources/DEMO_SOURCES.md says whose)."""
    from calibview.core.io.demo import demo_path as path

    return path()


def _api():
    import importlib                 # not `from calibview import api`: that would ask this __getattr__ again

    return importlib.import_module("calibview.api")


def __getattr__(name: str):
    if name.startswith("__") or name in ("api", "core", "cli", "gui", "plot"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    api = _api()
    if name in api.EXPORTS:
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_api().EXPORTS))
