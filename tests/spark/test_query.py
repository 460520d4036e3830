"""query_keys: many keys across many stores on Spark == MessageStore.query_by_key, key by key."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.errors import InvalidArgumentError, InvalidKeyError, InvalidTopicError, StoreNotFoundError
from mqstore.spark.query import query_keys, read_keys_file

GEOMETRY = dict(commit_log_file_size=32 * 1024, consume_queue_file_size=400, hash_slot_num=16, index_num=120)


def ORDER(r: tuple) -> tuple:  # per key and broker, newest first (the local order)
    return (r[0].encode(), r[1], -r[5], -r[2])


def local_answer(stores: dict[str, Path], topic: str, keys: list[str], config: StoreConfig | None = None,
                 begin: int | None = None, end: int | None = None) -> list[tuple]:
    out = []
    for broker, root in stores.items():
        with MessageStore.open(root, config, read_only=True) as store:
            for key in keys:
                for m in store.query_by_key(topic, key, begin, end):
                    out.append((key, broker, m.commit_log_offset, m.queue_id, m.queue_offset, m.store_timestamp,
                                m.body, m.uniq_key, tuple(m.keys)))
    return out


def spark_answer(df) -> list[tuple]:  # df: a pyspark DataFrame
    return [(r.key, r.brokerName, r.commitLogOffset, r.queueId, r.queueOffset, r.storeTimestamp, bytes(r.body),
             r.uniqKey, tuple(r.keys)) for r in df.collect()]


def test_fixture_stores_match_local_query(spark, shared_fixtures: Path) -> None:
    import json

    for case in ("basic", "prop_crc"):
        root = shared_fixtures / "rocketmq" / case / "store"
        manifest = json.loads((root.parent / "manifest.json").read_text())
        cfg = manifest["config"]
        config = StoreConfig(commit_log_file_size=cfg["mappedFileSizeCommitLog"],
                             consume_queue_file_size=cfg["mappedFileSizeConsumeQueue"],
                             hash_slot_num=cfg["maxHashSlotNum"], index_num=cfg["maxIndexNum"])
        by_topic: dict[str, set[str]] = {}
        for m in manifest["messages"]:
            ks = by_topic.setdefault(m["topic"], set())
            ks.update(k for k in (m.get("keys") or "").split(" ") if k)
            if m.get("uniqKey"):
                ks.add(m["uniqKey"])
        assert by_topic, "fixture without messages"
        for topic, keys in by_topic.items():
            if not keys:
                continue
            wanted = [*sorted(keys), "absent-key", "ключ-🙂"]
            df = query_keys(spark, [root], topic, wanted)  # geometry detected from the files
            got = spark_answer(df)
            expected = local_answer({"store": root}, topic, wanted, config)
            assert got == sorted(expected, key=ORDER), (case, topic)
            assert sorted(df.columns) == sorted([*spark.read.format("rocketmq").load(str(root)).columns, "key"])


@pytest.fixture(scope="module")
def three_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("stores")
    stores = {}
    rng = random.Random(17)
    for b, name in enumerate(["broker-a", "broker-b", "broker-c"]):
        root = base / name / "store"
        with MessageStore.open(root, StoreConfig(**GEOMETRY, broker_name=name)) as store:
            batch = []
            for i in range(400):
                topic = rng.choice(["orders", "orders", "payments"])
                keys = [f"order-{i % 150}", f"user-{i % 7}"]
                if i % 11 == 0:
                    keys.append("ключ-🙂")  # non-ASCII, outside the BMP
                if i % 13 == 0:
                    keys.append(f"order-{i % 150}")  # the same key twice in one message
                batch.append(dict(topic=topic, queue_id=(i + b) % 4, body=f"{name}:{i}".encode(), keys=keys))
                if len(batch) == 50:
                    store.put_batch(batch)
                    batch = []
        stores[name] = root
    return stores


def test_many_stores_match_local_query(spark, three_stores: dict[str, Path], tmp_path: Path) -> None:
    keys = [f"order-{i}" for i in range(0, 160, 3)] + ["user-3", "ключ-🙂", "nope", "order-"]
    config = StoreConfig(**GEOMETRY)
    expected = local_answer(three_stores, "orders", keys, config)
    assert len({e[1] for e in expected}) == 3 and len(expected) > 100
    roots = list(three_stores.values())
    names = list(three_stores)
    df = query_keys(spark, roots, "orders", keys, broker_names=names, key_partitions=3)
    assert spark_answer(df) == sorted(expected, key=ORDER)
    # keys as a file and as a DataFrame give the same rows
    f = tmp_path / "keys.txt"
    f.write_text("\n".join(["  " + k + "  " for k in keys] + ["", keys[0]]), encoding="utf-8")
    assert spark_answer(query_keys(spark, roots, "orders", f, broker_names=names)) == spark_answer(df)
    kdf = spark.createDataFrame([(k,) for k in keys], "key STRING")
    assert spark_answer(query_keys(spark, roots, "orders", kdf, broker_names=names)) == spark_answer(df)
    # a time window is exact to the millisecond, as the local query
    ts = sorted({e[5] for e in expected})
    lo, hi = ts[len(ts) // 3], ts[2 * len(ts) // 3]
    windowed = local_answer(three_stores, "orders", keys, config, lo, hi)
    got = spark_answer(query_keys(spark, roots, "orders", keys, broker_names=names, begin=lo, end=hi))
    assert got == sorted(windowed, key=ORDER)
    assert 0 < len(got) < len(expected)
    # another topic's keys never leak in (the index key is topic#key)
    assert spark_answer(query_keys(spark, roots, "payments", ["order-3"], broker_names=names)) == sorted(
        local_answer(three_stores, "payments", ["order-3"], config), key=ORDER)


def test_bad_input(spark, three_stores: dict[str, Path], tmp_path: Path) -> None:
    roots = list(three_stores.values())
    names = list(three_stores)
    with pytest.raises(InvalidTopicError):
        query_keys(spark, roots, "bad topic", ["k"], broker_names=names)
    with pytest.raises(InvalidArgumentError):
        query_keys(spark, roots, "orders", [], broker_names=names)
    with pytest.raises(InvalidKeyError):
        query_keys(spark, roots, "orders", ["ok", ""], broker_names=names)
    with pytest.raises(StoreNotFoundError):
        query_keys(spark, [tmp_path / "missing"], "orders", ["k"])
    with pytest.raises(InvalidArgumentError):
        query_keys(spark, roots, "orders", tmp_path / "no-such-file.txt", broker_names=names)
    with pytest.raises(InvalidArgumentError, match="same broker name"):
        query_keys(spark, [roots[0], roots[1]], "orders", ["k"])  # both directories are called "store"
    with pytest.raises(InvalidArgumentError, match="broker names given"):
        query_keys(spark, roots, "orders", ["k"], broker_names=["a"])
    with pytest.raises(InvalidArgumentError):
        query_keys(spark, roots, "orders", ["k"], begin=10, end=5, broker_names=names)
    with pytest.raises(InvalidArgumentError):
        query_keys(spark, roots, "orders", spark.createDataFrame([(1,)], "n INT"), broker_names=names)
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(InvalidArgumentError, match="no key"):
        read_keys_file(tmp_path / "empty.txt")
    (tmp_path / "blank.txt").write_text("a b\n")
    with pytest.raises(InvalidKeyError, match="blanks"):
        read_keys_file(tmp_path / "blank.txt")
