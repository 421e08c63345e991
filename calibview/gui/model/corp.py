"""The CORP curves the window shows, in plain Python: whether the toggle is on (curves with their bands on the
diagram) or the MCB-DSC tab is looked at (the decomposition alone), the latest curves computed, and their own
"latest request wins" channel to the worker.

CORP has no bandwidth: the curves are keyed by core.reports.corp.corp_key, so a slider move, a kernel or an
interval level asks for nothing; ``asked`` counts the requests sent (tests assert on it). The bands come after
the curves: the worker answers the curves at once, then the bands (``final``).
"""

from __future__ import annotations

from typing import Callable, Optional

from calibview.core.reports.corp import CorpSet, corp_key
from calibview.gui.model.channel import Channel


def run_key(ev) -> tuple:
    """(run file, run name, eval split): how an evaluation's CorpSet is found (curves.csv's key too)."""
    return ev.run.file, ev.run.name, ev.request.eval_split


class CorpModel:
    """``on`` (the diagram's toggle), ``bootstrap`` (its bootstrap band too), ``tab`` (the MCB-DSC tab is shown);
    ``sets`` run_key -> CorpSet of the latest answer. ``notify()`` after anything shown changed;
    ``ask(generation, evaluations, bands, cancel)`` sends work to the worker."""

    def __init__(self, notify: Callable[[], None], ask: Callable[..., None]) -> None:
        self.notify, self._ask = notify, ask
        self.channel = Channel()
        self.on = False
        self.bootstrap = False
        self.tab = False
        self.sets: dict[tuple, CorpSet] = {}
        self.evaluations: tuple = ()
        self.asked = 0

    def set_on(self, on: bool, bootstrap: Optional[bool] = None) -> None:
        """The toggle (and its bootstrap band): the curves are asked for when missing."""
        self.on = bool(on)
        if bootstrap is not None:
            self.bootstrap = bool(bootstrap)
        self._request()
        self.notify()

    def set_tab(self, shown: bool) -> None:
        """The MCB-DSC tab is shown or hidden: its decomposition is computed only while someone looks."""
        self.tab = bool(shown)
        self._request()

    def evaluations_changed(self, evaluations: tuple) -> None:
        """New evaluations are shown: their curves are asked for once none is pending (the toggle or the tab on)."""
        self.evaluations = tuple(e for e in evaluations if e is not None)
        if any(e.pending for e in self.evaluations):
            return
        self._request()

    def cancel(self) -> None:
        """A new evaluation started: stop computing the curves of the old one."""
        self.channel.forget()

    def shown(self, ev) -> Optional[CorpSet]:
        """The CorpSet of evaluation ``ev`` when it is computed for its request (None otherwise)."""
        cs = self.sets.get(run_key(ev)) if ev is not None else None
        return cs if cs is not None and cs.key == corp_key(ev.request) else None

    def answered(self, generation: int, result, final: bool) -> None:
        """The worker's sets (run_key -> CorpSet; the curves first, then with bands when ``final``), or the
        sentence saying why they failed (a str)."""
        if not (self.channel.settle(generation) if final else self.channel.is_current(generation)):
            return
        if isinstance(result, str):
            self.channel.forget()
            return
        self.sets = dict(result)
        self.notify()

    def _request(self) -> None:
        evs = self.evaluations
        if not (self.on or self.tab) or not evs or any(e.pending for e in evs):
            return
        bands = self.on
        have = [self.shown(e) for e in evs]
        if all(cs is not None and (cs.bands or not bands) for cs in have):
            return
        key = (tuple(corp_key(e.request) for e in evs), bands)
        if self.channel.asked(key) or (not bands and self.channel.asked((key[0], True))):
            return
        ticket = self.channel.start(key)
        self.asked += 1
        self._ask(ticket.generation, evs, bands, ticket.cancel)
