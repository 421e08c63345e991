"""Importing CSV tables: :mod:`~calibview.core.io.csv_import.columns` guesses the layout from the header
(top-label columns, or one probability or logit column per class) and :mod:`~calibview.core.io.csv_import.stream`
reads the rows in chunks and appends them to the HDF5 file, so memory stays constant whatever the row count.
"""
