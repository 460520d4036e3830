"""Torn and corrupt files in CI (``tools/corruption_campaign.py``; ``MQSTORE_CORRUPT_FLIPS`` sets
the bit flips per file kind): every case is detected or repaired, no query returns a wrong message
as valid and nothing raises an untyped exception."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from faults_support import env_int, load_tool

campaign = load_tool("corruption_campaign")
FLIPS = env_int("MQSTORE_CORRUPT_FLIPS", 6)


@pytest.fixture(scope="module")
def tallies(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return campaign.run(FLIPS, 20241123, tmp_path_factory.mktemp("corrupt"))


# A RocketMQ record's CRC covers only its body: a flipped bit in the topic, flag, timestamps or
# properties of a record read by its offset cannot be told from a real value (readers cross-check
# what they can: physical offset, and topic/queue/queue offset against the ConsumeQueue).
FORMAT_BLIND = {("rocketmq", "commitlog", "bit_flip")}


def test_no_wrong_answer_and_no_untyped_error(tallies: dict) -> None:
    bad = {k: (t.wrong, t.untyped, t.examples) for k, t in tallies.items()
           if t.untyped or (t.wrong and k not in FORMAT_BLIND)}
    assert bad == {}
    for k in FORMAT_BLIND:
        t = tallies[k]
        cases_with_wrong = sum(1 for e in t.examples if "wrong=" in e)
        assert cases_with_wrong <= max(2, t.injected // 5), t


def test_every_file_kind_and_fault_kind_was_exercised(tallies: dict) -> None:
    kinds = {(layout, kind) for layout, kind, _ in tallies}
    assert {("rocketmq", k) for k in ("commitlog", "consumequeue", "index", "checkpoint")} <= kinds
    assert {("kafka", k) for k in (".log", ".index", ".timeindex", "checkpoint")} <= kinds
    faults = {fault for _, _, fault in tallies}
    assert {"zero_tail", "truncate_tail", "bit_flip", "wrong_length", "preallocated_empty", "missing",
            "stray"} <= faults


def test_torn_tails_at_every_byte_are_detected_and_repaired(tallies: dict) -> None:
    """Kafka: each truncation/zeroing inside the last batch is reported by verify (CRC / torn
    tail) and recovery cuts it.  RocketMQ: recovery always repairs; verify reports every torn
    tail that reaches the CRC-covered or length fields."""
    for fault in ("truncate_tail", "zero_tail"):
        t = tallies[("kafka", ".log", fault)]
        assert t.injected > 50 and t.repaired == t.injected
        assert t.detected >= t.injected - 3  # zeroing only the last bytes of a zero-filled field may not change it
    t = tallies[("rocketmq", "commitlog", "zero_tail")]
    assert t.injected > 50 and t.repaired == t.injected and t.detected > t.injected // 2


def test_bit_flips_in_checksummed_or_cross_checked_files_are_detected(tallies: dict) -> None:
    for key in (("kafka", ".index", "bit_flip"), ("kafka", ".timeindex", "bit_flip"),
                ("rocketmq", "consumequeue", "bit_flip")):
        t = tallies[key]
        assert t.detected + t.open_typed >= t.injected * 0.8, (key, t)
    for key in (("rocketmq", "commitlog", "wrong_length"), ("rocketmq", "consumequeue", "wrong_length"),
                ("rocketmq", "index", "wrong_length")):
        t = tallies[key]
        assert t.detected == t.injected, (key, t)


def test_campaign_check_counts_a_wrong_answer(tmp_path: Path) -> None:
    """The checker is not vacuous: a reference that disagrees with the store counts as wrong."""
    ref = campaign.build_rocketmq(tmp_path / "s")
    off = min(ref.by_offset)
    topic, q, qo, _body, key = ref.by_offset[off]
    ref.by_offset[off] = (topic, q, qo, b"something else", key)
    shutil.rmtree(tmp_path / "s" / "index")  # rebuilt on open; the store itself is fine
    o = campaign.check_rocketmq(tmp_path / "s", ref, random.Random(1))
    assert o.wrong >= 1
