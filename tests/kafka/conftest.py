"""Shared fixtures of the Kafka-layer tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures" / "kafka"
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


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def kafka_fixtures() -> Path:
    _require_fixtures()
    return FIXTURES
