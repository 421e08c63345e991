"""Top-label runs: splits stored as ``/<model>/<dataset>/<split>/{confidence, predictions, labels}`` (the
confidence of the predicted class, the predicted class and the true class of each sample), the form that
reliability-diagram tools, language-model evaluations and spreadsheets publish (docs/FORMAT.md).

Here: :mod:`~calibview.core.io.toplabel.format` (the names, the number of classes K from a ``num_classes``
attribute or unknown, the shape and value checks), :mod:`~calibview.core.io.toplabel.read` (a split's three
(N,) vectors, read in chunks and validated) and :mod:`~calibview.core.io.toplabel.write`.
"""
