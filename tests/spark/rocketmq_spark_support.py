"""Helpers of the rocketmq Spark source tests: small stores written with MessageStore, fixture
manifests as expected rows."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from mqstore import MessageStore, StoreConfig
from mqstore.formats.rocketmq.properties import parse_properties, split_keys

T0 = 1_700_000_000_000
TOPICS = ("orders", "payments", "audit")


def small_config(clock_start: int = T0, *, segment: int = 4096, background: bool = False) -> StoreConfig:
    """Tiny geometry: 4 KiB CommitLog segments, 10-unit ConsumeQueue files, a small index, and a
    deterministic clock (+1 ms per reading) unless ``background`` (the live-writer tests)."""
    counter = itertools.count(clock_start)
    return StoreConfig(commit_log_file_size=segment, consume_queue_file_size=200, hash_slot_num=64, index_num=256,
                       background_services=background, clock=None if background else (lambda: next(counter)))


def fill(store: MessageStore, n: int, *, start: int = 0, body_size: int = 40) -> None:
    """``n`` messages round-robin over TOPICS and queues 0-1, keys ``k<i>``, tags ``T<i % 3>``."""
    for i in range(start, start + n):
        topic = TOPICS[i % len(TOPICS)]
        store.put(topic, (f"msg-{i}:".encode() + bytes(range(256)))[:body_size], queue_id=(i // 3) % 2,
                  keys=[f"k{i}", "all"], tags=f"T{i % 3}", properties={"seq": str(i)})


def make_store(path: Path, n: int, *, body_size: int = 40, clock_start: int = T0) -> Path:
    with MessageStore.open(path, small_config(clock_start)) as s:
        fill(s, n, body_size=body_size)
        s.dispatch()
    return path


def manifest(fixtures: Path, case: str) -> dict[str, Any]:
    return json.loads((fixtures / "rocketmq" / case / "manifest.json").read_text())


def expected_rows(m: dict[str, Any], broker: str, *, include_body: bool = True) -> list[dict[str, Any]]:
    """The manifest's messages as rows of the rocketmq source (CommitLog order)."""
    rows = []
    for x in m["messages"]:
        props = parse_properties(x["properties"])
        # The manifest has what the producer set; an empty TAGS value ("TAGS\x01\x02" on disk) is
        # dropped by the broker's property decoder, so consumers (and this source) see no tags.
        assert props.get("TAGS") == x["tags"] or (x["tags"] == "" and "TAGS" not in props), x
        rows.append({
            "topic": x["topic"], "flag": x["flag"], "body": bytes.fromhex(x["bodyHex"]) if include_body else None,
            "properties": parse_properties(x["properties"]), "brokerName": broker, "queueId": x["queueId"],
            "queueOffset": x["queueOffset"], "bornTimestamp": x["bornTimestamp"],
            "storeTimestamp": x["storeTimestamp"], "commitLogOffset": x["physicalOffset"], "size": x["size"],
            "keys": split_keys(x["keys"]), "tags": props.get("TAGS"), "uniqKey": x["uniqKey"], "sysFlag": x["sysFlag"],
            "bornHost": x["bornHost"], "storeHost": x["storeHost"], "reconsumeTimes": x["reconsumeTimes"],
            "bodyCRC": x["bodyCRC"],
        })  # fmt: skip
    return sorted(rows, key=lambda r: r["commitLogOffset"])


def normalize(row: dict[str, Any]) -> dict[str, Any]:
    """A row from Arrow (``to_pylist``: maps as pair lists) or Spark (``Row.asDict``) as a plain dict."""
    out = dict(row)
    props = out["properties"]
    out["properties"] = dict(props) if props is not None else None
    if out.get("body") is not None:
        out["body"] = bytes(out["body"])
    out["keys"] = list(out["keys"]) if out["keys"] is not None else None
    return out
