"""``kernels.threads.ordered_map``: the pipeline of the dumps (results in order, buffer slots never
shared by two live results, running calls waited for when the caller stops)."""

from __future__ import annotations

from typing import Any


def test_ordered_map_yields_in_order_with_distinct_live_slots() -> None:
    import threading
    import time

    from mqstore.kernels.threads import ordered_map

    for depth in (1, 2, 3):
        live: dict[int, int] = {}
        lock = threading.Lock()

        def fn(item: int, slot: int, live: dict[int, int] = live, lock: Any = lock) -> tuple[int, int]:
            with lock:
                assert slot not in live.values()  # no result alive in this slot
                live[item] = slot
            time.sleep(0.001 * (item % 3))
            return item, slot

        got = []
        for item, slot in ordered_map(fn, list(range(20)), depth):
            assert 0 <= slot <= max(depth, 1)
            got.append(item)
            with lock:
                del live[item]  # consumed
        assert got == list(range(20))


def test_ordered_map_waits_for_running_calls_when_stopped_early() -> None:
    import time

    from mqstore.kernels.threads import ordered_map

    ended: list[int] = []

    def fn(item: int, slot: int) -> int:
        time.sleep(0.01)
        ended.append(item)
        return item

    gen = ordered_map(fn, list(range(10)), 3)
    assert next(gen) == 0
    gen.close()
    started = len(ended)
    time.sleep(0.05)
    assert len(ended) == started  # nothing was still running after close()


def test_ordered_map_raises_the_error_of_a_call_in_order() -> None:
    import pytest

    from mqstore.kernels.threads import ordered_map

    def fn(item: int, slot: int) -> int:
        if item == 5:
            raise ValueError("five")
        return item

    got = []
    with pytest.raises(ValueError, match="five"):
        for item in ordered_map(fn, list(range(10)), 2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]
