"""``commitlog._OneAhead``: the one-call-ahead worker of ``CommitLog.scan_bounded``."""

from __future__ import annotations

import threading

import pytest

from mqstore.errors import CorruptDataError
from mqstore.storage.rocketmq.commitlog import _OneAhead


def test_values_in_order_then_none() -> None:
    seen_threads = set()

    def gen():
        for i in range(5):
            seen_threads.add(threading.current_thread().name)
            yield i

    out = []
    with _OneAhead(gen(), "t-ahead") as ahead:
        ahead.ask()
        while (v := ahead.result()) is not None:
            ahead.ask()
            out.append(v)
    assert out == [0, 1, 2, 3, 4]
    assert seen_threads == {"t-ahead"}


def test_error_is_raised_by_result_and_the_thread_ends() -> None:
    def gen():
        yield 1
        raise CorruptDataError("bad record", offset=7)

    with pytest.raises(CorruptDataError, match="bad record"), _OneAhead(gen(), "t-err") as ahead:
        ahead.ask()
        assert ahead.result() == 1
        ahead.ask()
        ahead.result()
    assert not any(t.name == "t-err" for t in threading.enumerate())


def test_leaving_early_waits_for_the_running_call() -> None:
    started, release, finished = threading.Event(), threading.Event(), []

    def gen():
        yield 0
        started.set()
        release.wait()
        finished.append(True)
        yield 1

    ahead = _OneAhead(gen(), "t-early")
    with ahead:
        ahead.ask()
        assert ahead.result() == 0
        ahead.ask()
        started.wait()
        release.set()
    assert finished == [True]
    assert not ahead._thread.is_alive()
