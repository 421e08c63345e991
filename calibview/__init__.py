"""calibview: can your classifier's probabilities be trusted?"""

from calibview._version import __version__


def demo_path():
    """The bundled demo file (real CIFAR ResNet-110 logits; calibview/resources/DEMO_SOURCES.md says whose)."""
    from calibview.core.io.demo import demo_path as path

    return path()
