"""calibview: can your classifier's probabilities be trusted?"""

__version__ = "0.1.0"


def demo_path():
    """The bundled demo file (real CIFAR ResNet-110 logits; calibview/resources/DEMO_SOURCES.md says whose)."""
    from .core.demo import demo_path as path

    return path()
