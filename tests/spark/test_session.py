from __future__ import annotations

import pytest

from mqstore.errors import InvalidArgumentError
from mqstore.spark import parse_conf

pytestmark = pytest.mark.spark


def test_parse_conf() -> None:
    assert parse_conf(["spark.a=1", "b= x=y"]) == {"spark.a": "1", "b": " x=y"}
    with pytest.raises(InvalidArgumentError):
        parse_conf(["novalue"])


def test_session_runs_a_job(spark) -> None:
    assert spark.range(10).count() == 10
