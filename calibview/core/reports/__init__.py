"""What an evaluation becomes on disk and on screen: the CSV / JSON tables (``tables``), the tables of slices,
domains and comparisons (``contrasts``), the report folder and its manifest (``folder``), the
selective-prediction tables (``selective``), the CORP curves of an evaluation's calibrators with their curves.csv
columns and MCB-DSC points (``corp``), the one-vs-rest CORP of a chosen class with its tables (``corp_class``),
the offline HTML page (``html``) and the display convention for
numbers (``units``)."""
