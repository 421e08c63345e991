"""One "latest request wins" channel: the bookkeeping every kind of background request shares.

The window asks the worker for an evaluation, the Decisions view's data or the slices of a split, and may ask
again before the answer comes (a new selection, a slider released). Each request on a channel gets the next
generation number and its own cancel event; starting a request cancels the one before it, and an answer tagged
with an older generation is dropped. The channel also remembers the key of its latest request, so that asking
for the same thing twice computes it once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Hashable, Optional


@dataclass(frozen=True)
class Ticket:
    """One request on a channel: its generation number and its own cancel event, which the worker checks between
    chunks of work."""

    generation: int
    cancel: threading.Event


class Channel:
    """Latest request wins: generation numbers, the running request's cancel event and the latest request's key.

    ``generation`` is the number of the latest request (0 before the first); ``key`` what it asked for (None
    when the same request should be asked again)."""

    def __init__(self) -> None:
        self.generation = 0
        self.key: Optional[Hashable] = None
        self._event: Optional[threading.Event] = None

    @property
    def running(self) -> bool:
        """Whether the latest request is out and has had no answer (result, failure or cancellation) yet."""
        return self._event is not None

    @property
    def cancelled(self) -> bool:
        """Whether the latest request is out and was asked to stop."""
        return self._event is not None and self._event.is_set()

    def asked(self, key: Hashable) -> bool:
        """Whether ``key`` is what the latest request asked for (asking again would compute the same)."""
        return key is not None and key == self.key

    def start(self, key: Optional[Hashable] = None) -> Ticket:
        """A new request: the running one is cancelled, and its answers will be dropped as stale."""
        self.cancel()
        self.generation += 1
        self.key = key
        self._event = threading.Event()
        return Ticket(self.generation, self._event)

    def cancel(self) -> None:
        """Ask the running request to stop at its next check (its answer, if one still comes, is not stale)."""
        if self._event is not None:
            self._event.set()

    def forget(self) -> None:
        """Cancel the running request and forget it and its key: the same request will be asked again."""
        self.cancel()
        self._event = None
        self.key = None

    def is_current(self, generation: int) -> bool:
        """Whether ``generation`` is the latest request's (an answer to anything older is stale)."""
        return generation == self.generation

    def settle(self, generation: int) -> bool:
        """An answer of ``generation`` arrived: True when it answers the latest request, which is then no longer
        running; False when it is stale (the caller drops it)."""
        if generation != self.generation:
            return False
        self._event = None
        return True
