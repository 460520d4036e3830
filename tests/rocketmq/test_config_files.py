"""The broker's config/ JSON files: ``mqstore rocketmq consumers`` (consumerProgress offline),
delay offsets and SCHEDULE_TOPIC_XXXX queues in ``inspect``, bad JSON as one error line."""

from __future__ import annotations

import hashlib
import json
from itertools import count
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.config_json import (
    loads_broker_json,
    parse_consumer_offsets,
    parse_delay_offsets,
    parse_topics,
)
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.verify import verify_store

# as the broker's fastjson writes them: number keys without quotes, tabs
CONSUMER_OFFSETS = """{
\t"offsetTable":{
\t\t"orders@billing":{0:40,1:7,2:0
\t\t},
\t\t"orders@audit":{0:43,1:40
\t\t},
\t\t"%RETRY%billing@billing":{0:0
\t\t},
\t\t"gone@billing":{0:5
\t\t}
\t},
\t"dataVersion":{"counter":12,"stateVersion":0,"timestamp":1700000000123}
}"""
DELAY_OFFSETS = '{\n\t"offsetTable":{3:2,1:4\n\t},\n\t"dataVersion":{"counter":3,"timestamp":1700000000000}\n}'
TOPICS = ('{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"orders":{"order":false,"perm":6,'
          '"readQueueNums":3,"topicFilterType":"SINGLE_TAG","topicName":"orders","topicSysFlag":0,"writeQueueNums":3}}}')
GROUPS = '{"subscriptionGroupTable":{"billing":{"groupName":"billing","consumeEnable":true}},"dataVersion":{}}'


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    ticks = count(1_700_000_000_000, 5)
    cfg = StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=20 * 100, hash_slot_num=50,
                      index_num=200, background_services=False, clock=lambda: next(ticks))
    root = tmp_path / "store"
    with MessageStore.open(root, cfg) as s:
        for qid, n in ((0, 43), (1, 40), (2, 3)):
            for i in range(n):
                s.put("orders", b"o%d" % i, qid, tags="paid")
        for level, n in ((1, 4), (3, 5)):
            for _ in range(n):
                s.put("SCHEDULE_TOPIC_XXXX", b"d", level - 1, properties={"DELAY": str(level)})
    conf = root / "config"
    conf.mkdir()
    (conf / "consumerOffset.json").write_text(CONSUMER_OFFSETS)
    (conf / "consumerOffset.json.bak").write_text(CONSUMER_OFFSETS)
    (conf / "delayOffset.json").write_text(DELAY_OFFSETS)
    (conf / "topics.json").write_text(TOPICS)
    (conf / "subscriptionGroup.json").write_text(GROUPS)
    (conf / "timermetrics").write_text("{}")
    return root


def test_fastjson_number_keys() -> None:
    assert loads_broker_json('{"a":{0:1, -2 :3},"s":"{4:5}"}') == {"a": {"0": 1, "-2": 3}, "s": "{4:5}"}
    got = parse_consumer_offsets(CONSUMER_OFFSETS)
    assert got.table[("orders", "billing")] == {0: 40, 1: 7, 2: 0}
    assert got.table[("%RETRY%billing", "billing")] == {0: 0}
    assert got.data_version is not None and got.data_version.counter == 12
    assert parse_delay_offsets(DELAY_OFFSETS) == {1: 4, 3: 2}
    assert parse_topics(TOPICS)["orders"]["readQueueNums"] == 3


NAME = st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=8)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.tuples(NAME, NAME.filter(lambda g: "%" not in g)),
                       st.dictionaries(st.integers(0, 1000), st.integers(-1, 2**62), max_size=5), max_size=5))
def test_consumer_offsets_round_trip(table: dict) -> None:
    body = ",".join(f'"{t}@{g}":{{' + ",".join(f"{q}:{o}" for q, o in qs.items()) + "}"
                    for (t, g), qs in table.items())
    assert parse_consumer_offsets('{"offsetTable":{' + body + "}}").table == table


@pytest.mark.parametrize("text", ["{not json", '{"offsetTable":[1,2]}', '{"offsetTable":{"nogroup":{0:1}}}',
                                  '{"offsetTable":{"t@g":{0:"x"}}}', "[]"])
def test_bad_consumer_offsets(text: str) -> None:
    with pytest.raises(CorruptDataError):
        parse_consumer_offsets(text)


def test_consumers_output(store: Path) -> None:
    before = tree_hash(store)
    r = run("rocketmq", "consumers", str(store))
    assert r.exit_code == 0, r.output
    assert r.output == (
        "consumer group audit\n"
        "#Topic  #QID  #Broker Offset        #Consumer Offset      #Diff\n"
        "orders  0     43                    43                    0\n"
        "orders  1     40                    40                    0\n"
        "Diff Total: 0\n"
        "\n"
        "consumer group billing\n"
        "#Topic          #QID  #Broker Offset        #Consumer Offset      #Diff\n"
        "%RETRY%billing  0     0                     0                     0\n"
        "gone            0     0                     5                     -5\n"
        "orders          0     43                    40                    3\n"
        "orders          1     40                    7                     33\n"
        "orders          2     3                     0                     3\n"
        "Diff Total: 34\n")
    r = run("rocketmq", "consumers", str(store), "--group", "audit", "--json")
    assert r.exit_code == 0
    assert [json.loads(x) for x in r.output.splitlines()] == [
        {"group": "audit", "topic": "orders", "queueId": 0, "brokerOffset": 43, "consumerOffset": 43, "minOffset": 0,
         "diff": 0},
        {"group": "audit", "topic": "orders", "queueId": 1, "brokerOffset": 40, "consumerOffset": 40, "minOffset": 0,
         "diff": 0}]
    assert tree_hash(store) == before


def test_inspect_shows_delay_queues_and_config(store: Path) -> None:
    before = tree_hash(store)
    r = run("rocketmq", "inspect", str(store), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["delayQueues"] == [
        {"level": 1, "delay": "1s", "queueId": 0, "maxOffset": 4, "deliveredOffset": 4, "pending": 0},
        {"level": 3, "delay": "10s", "queueId": 2, "maxOffset": 5, "deliveredOffset": 2, "pending": 3}]
    assert [(c["name"], c["entries"], c["error"]) for c in info["config"]] == [
        ("consumerOffset.json", 4, None), ("consumerOffset.json.bak", None, None), ("delayOffset.json", 2, None),
        ("subscriptionGroup.json", 1, None), ("timermetrics", None, None), ("topics.json", 1, None)]
    # timermetrics is the timer store's file: named as such, read by the timer section
    assert info["config"][4]["kind"].startswith("timer metrics per topic")
    r = run("rocketmq", "inspect", str(store))
    assert r.exit_code == 0 and "SCHEDULE_TOPIC_XXXX" in r.output and "timermetrics" in r.output
    assert tree_hash(store) == before


def test_garbage_json(store: Path) -> None:
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{"orders@billing":{0:40,')
    before = tree_hash(store)
    r = CliRunner().invoke(cli, ["rocketmq", "consumers", str(store)])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith("error: consumerOffset.json is not")
    assert "config/consumerOffset.json" in r.output
    r = run("rocketmq", "inspect", str(store), "--json")
    assert r.exit_code == 0
    bad = [c for c in json.loads(r.output)["config"] if c["error"]]
    assert [c["name"] for c in bad] == ["consumerOffset.json"]
    rep = verify_store(store, StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=20 * 100,
                                          hash_slot_num=50, index_num=200))
    assert len(rep.problems) == 1 and rep.problems[0].startswith("config/consumerOffset.json: ")
    r = run("rocketmq", "verify", str(store))
    assert r.exit_code == 1
    assert tree_hash(store) == before
