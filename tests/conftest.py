"""Shared pytest set-up.  Spark tests get one session-scoped local SparkSession (see tests/spark)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limits in tests (shared, noisy machines): hypothesis' per-example deadline and its
# too-slow health check are off; what an example may take is not a property under test.
settings.register_profile("mqstore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mqstore")

# Must happen before any JVM starts (Spark workers must use this interpreter).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

REPO = Path(__file__).resolve().parents[1]
# Reference fixtures made with the real RocketMQ and Kafka classes, kept inside the repository so
# that a clone with nothing beside it passes its own tests.
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"reference fixtures not found at {FIXTURES} (tests/fixtures is part of the repository)")
    return FIXTURES
