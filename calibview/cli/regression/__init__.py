"""The command line's regression runs: their options (``--reg-bandwidth``, ``--allow-crossing``), which runs and
recalibrators a command evaluates, their evaluation for ``metrics`` and ``report``, their lines in ``runs``
(:mod:`.commands`), and ``apply`` on a regression run (:mod:`.apply`)."""
