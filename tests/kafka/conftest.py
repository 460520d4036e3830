"""Pytest fixtures of the Kafka-layer tests (helpers live in kafka_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_support import CASES, FIXTURES, _require_fixtures


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def kafka_fixtures() -> Path:
    _require_fixtures()
    return FIXTURES
