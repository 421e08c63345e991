"""calibview: can your classifier's probabilities be trusted? (the version, kept apart so any layer may read it)."""

__version__ = "0.1.0"
