"""Regressions found by the property tests, kept as fixed examples."""

from __future__ import annotations

import numpy as np

from mqstore.formats.rocketmq.record import MessageRecord, encode_record
from mqstore.kernels.rocketmq.scan import scan_segment, scan_segment_py


def test_delay_fallback_does_not_check_crc() -> None:
    # A delay-topic record whose DELAY is not a number takes the reference tagsCode path; with a
    # wrong body CRC and check_crc=False both paths must still accept it.
    seg = (
        b"\x00\x00\x00u\xda\xa3 \xa7\x00\x0009" + bytes(35) + b"\x01\x01\x02\x03\x04\x05\x06\x07\x08"
        + bytes(8) + b"\x07\x08\t\n\x0b\x0c\r\x0e" + bytes(16) + b"\x13SCHEDULE_TOPIC_XXXX\x00\x07DELAY\x01a"
    )
    assert len(seg) == 117
    fast = scan_segment(seg, 0, 0, len(seg), check_crc=False, skip_length_mismatch=False)
    ref = scan_segment_py(seg, 0, 0, len(seg), check_crc=False, skip_length_mismatch=False)
    assert len(fast) == len(ref) == 1
    assert np.array_equal(fast.tags_code, ref.tags_code)


def test_magic_chosen_from_topic_length() -> None:
    short = encode_record(MessageRecord(topic="T" * 127))
    long = encode_record(MessageRecord(topic="T" * 128))
    assert short[4:8] == b"\xda\xa3\x20\xa7" and long[4:8] == b"\xda\xa3\x20\xab"
