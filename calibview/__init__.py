"""calibview: can your classifier's probabilities be trusted?"""

__version__ = "0.1.0"
