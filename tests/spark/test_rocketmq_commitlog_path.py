"""The ``rocketmq`` source's ``commitLogPath`` option: a CommitLog elsewhere than STORE/commitlog,
or spread over several directories (storePathCommitLog as a list)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rocketmq_spark_support import make_store, normalize

from mqstore.errors import SourceOptionError, StoreNotFoundError
from mqstore.spark._rocketmq_options import parse_options
from mqstore.spark._rocketmq_store import list_segments


def rows_of(df) -> list[dict]:
    return sorted((normalize(r.asDict()) for r in df.collect()), key=lambda r: r["commitLogOffset"])


def test_commit_log_path_option_parsing() -> None:
    o = parse_options({"path": "/s/broker-a", "commitLogPath": "/d1/cl,/d2/cl"})
    assert o.commit_log_paths == ("/d1/cl,/d2/cl",) and o.commit_log_of(0) == "/d1/cl,/d2/cl"
    assert parse_options({"path": "/s/broker-a"}).commit_log_of(0) is None
    o = parse_options({"paths": '["/s/a", "/s/b"]', "commitLogPath": '["/x/cl", null]'})
    assert o.commit_log_paths == ("/x/cl", None)
    with pytest.raises(SourceOptionError, match="JSON list aligned"):
        parse_options({"paths": '["/s/a", "/s/b"]', "commitLogPath": "/x/cl"})
    with pytest.raises(SourceOptionError, match="one directory \\(or null\\) per store"):
        parse_options({"paths": '["/s/a", "/s/b"]', "commitLogPath": '["/x/cl"]'})


@pytest.mark.spark
def test_read_a_multi_path_commit_log(spark, tmp_path: Path) -> None:
    plain = make_store(tmp_path / "plain" / "broker-a", 150)
    moved = tmp_path / "moved" / "broker-a"
    shutil.copytree(plain, moved)
    dirs = [tmp_path / "disk1", tmp_path / "disk2"]
    for d in dirs:
        d.mkdir()
    segs = sorted((moved / "commitlog").iterdir())
    assert len(segs) >= 2
    for i, p in enumerate(segs):  # the broker's round robin by segment number
        shutil.move(str(p), dirs[i % 2] / p.name)
    (moved / "commitlog").rmdir()
    spec = ",".join(str(d) for d in dirs)
    assert [s.base for s in list_segments(str(moved), spec)] == [int(p.name) for p in segs]
    want = rows_of(spark.read.format("rocketmq").load(str(plain)))
    got = rows_of(spark.read.format("rocketmq").option("commitLogPath", spec).load(str(moved)))
    assert got == want and len(got) == 150
    with pytest.raises(StoreNotFoundError, match="no commitlog directory"):
        list_segments(str(moved))
