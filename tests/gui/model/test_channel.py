"""The "latest request wins" channel: numbering, cancelling the request before, dropping stale answers, keys."""

import dataclasses

import pytest

from calibview.gui.model.channel import Channel, Ticket


def test_generations_count_up_from_one():
    ch = Channel()
    assert ch.generation == 0 and not ch.running
    assert [ch.start().generation for _ in range(3)] == [1, 2, 3]
    assert ch.generation == 3 and ch.running


def test_a_new_request_cancels_the_one_before_and_only_that_one():
    ch = Channel()
    first = ch.start()
    second = ch.start()
    assert first.cancel.is_set()
    assert not second.cancel.is_set()
    assert first.cancel is not second.cancel          # each request its own event
    third = ch.start()
    assert second.cancel.is_set() and not third.cancel.is_set()


def test_an_answer_to_a_superseded_request_is_dropped():
    ch = Channel()
    old = ch.start()
    new = ch.start()
    assert not ch.is_current(old.generation) and ch.is_current(new.generation)
    assert ch.settle(old.generation) is False
    assert ch.running                                  # the stale answer did not end the latest request
    assert ch.settle(new.generation) is True
    assert not ch.running
    assert ch.settle(old.generation) is False          # nor does a late one afterwards


def test_cancel_asks_the_running_request_to_stop_but_its_answer_still_counts():
    ch = Channel()
    t = ch.start()
    assert not ch.cancelled
    ch.cancel()
    assert t.cancel.is_set() and ch.cancelled and ch.generation == 1
    assert ch.settle(1) is True and not ch.cancelled
    ch.cancel()                                        # nothing running: nothing to set
    assert not ch.running


def test_keys_say_whether_the_same_request_was_asked():
    ch = Channel()
    assert not ch.asked(None)                          # before any request, even the None key is not asked
    ch.start(("file.h5", "m/d", "test"))
    assert ch.asked(("file.h5", "m/d", "test"))
    assert not ch.asked(("file.h5", "m/d", "val"))
    ch.start()                                         # a request without a key
    assert ch.key is None and not ch.asked(None)


def test_forget_cancels_and_lets_the_same_request_be_asked_again():
    ch = Channel()
    t = ch.start("k")
    ch.forget()
    assert t.cancel.is_set() and ch.key is None and not ch.asked("k") and not ch.running
    assert ch.generation == 1                          # no new number: nothing was asked
    assert ch.start("k").generation == 2


def test_a_ticket_is_immutable():
    t = Channel().start()
    assert isinstance(t, Ticket)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.generation = 5
