"""Outputs that survive kills, full disks and concurrent writers: advisory locks on outputs (:mod:`.locks`), the
swap of a staged folder into place (:mod:`.swap`), the removal of what killed runs left behind (:mod:`.stale`) and
the test hooks that kill the process or fail a write at named points (:mod:`.hooks`)."""
