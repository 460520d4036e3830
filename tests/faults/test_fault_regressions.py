"""Regression tests for bugs the fault campaigns found (one test per bug, smallest reproduction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.storage.rocketmq.store import RocketMQStore


def _small() -> StoreConfig:
    return StoreConfig(commit_log_file_size=8192, consume_queue_file_size=200, hash_slot_num=16, index_num=24,
                       background_services=False)


def test_crash_during_recovery_of_a_clean_store_is_an_unclean_shutdown(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash campaign: a SIGKILL while a cleanly closed store was being recovered left no ``abort``
    file, so the next open trusted half-recovered files as a clean shutdown."""
    with MessageStore.open(tmp_path, _small()) as s:
        s.put("T", b"x", keys=["k"])
    assert not (tmp_path / "abort").exists()

    def die(self: RocketMQStore) -> None:
        raise KeyboardInterrupt  # stands for the kill, in the middle of recovery

    monkeypatch.setattr(RocketMQStore, "_load_and_recover", die)
    with pytest.raises(KeyboardInterrupt):
        MessageStore.open(tmp_path, _small())
    monkeypatch.undo()
    assert (tmp_path / "abort").exists()
    with MessageStore.open(tmp_path, _small()) as s:
        assert not s.recovery.clean_shutdown
        assert [m.body for m in s.query_by_key("T", "k")] == [b"x"]
    with MessageStore.open(tmp_path, _small()) as s:
        assert s.recovery.clean_shutdown
