"""From calibrated to shipped: the versioned inference config (``config``), the release build (``build``), the
acceptance checklist (``acceptance``), drift re-evaluation on new labelled data (``drift``) and the statistics
they archive (``stats``)."""
