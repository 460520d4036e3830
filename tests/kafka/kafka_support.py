"""Shared paths and builders of the Kafka-layer tests (a uniquely named module: other test
directories have their own conftest/helpers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mqstore.formats.kafka import SimpleRecord, encode_batch

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "kafka"
CASES = ["single_default", "multi_segment_roll_bytes", "append_groups", "unclean_flush", "corrupt_tail_recover"]


def _require_fixtures() -> None:
    if not FIXTURES.is_dir():
        pytest.fail(f"Kafka fixtures are missing: {FIXTURES}")
    missing = [c for c in CASES if not (FIXTURES / c / "manifest.json").is_file()]
    if missing:
        pytest.fail(f"Kafka fixture cases missing: {missing}")


def load_manifest(case: str) -> dict[str, Any]:
    _require_fixtures()
    return json.loads((FIXTURES / case / "manifest.json").read_text())


def case_dir(case: str) -> Path:
    _require_fixtures()
    return FIXTURES / case


def copy_partition(case: str, dest: Path, sub: str = "segments") -> Path:
    """Copy a fixture partition directory to ``dest`` (tests never write into the fixtures)."""
    target = dest / "topic-0"
    shutil.copytree(case_dir(case) / sub, target)
    for f in target.iterdir():
        f.chmod(0o644)
    target.chmod(0o755)
    return target

def batch(base_offset: int, count: int = 1, ts: int | None = None, value: bytes = b"v", **kw: object) -> bytes:
    """A v2 batch with ``count`` records at ``base_offset..``; timestamps default to offset × 10."""
    recs = [SimpleRecord(value=value + str(base_offset + i).encode(),
                         timestamp=(ts if ts is not None else (base_offset + i) * 10)) for i in range(count)]
    return encode_batch(recs, base_offset=base_offset, **kw)  # type: ignore[arg-type]


def append_batch(seg, base_offset: int, count: int = 1, ts: int | None = None) -> bytes:
    data = batch(base_offset, count, ts)
    last = base_offset + count - 1
    max_ts = ts if ts is not None else last * 10
    seg.append(last, max_ts, last, data)
    return data
