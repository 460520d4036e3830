"""`mqstore rocketmq report`: the figures of a store built with known shapes (a planted long hash
chain of keys with colliding Java hashCodes, a queue with no traffic, store time going backwards
in one segment, a ConsumeQueue behind the CommitLog, consumer offsets), asserted exactly."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.consumequeue import CQ_UNIT_SIZE
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer
from mqstore.formats.rocketmq.javahash import index_key_hash, java_string_hashcode
from mqstore.kernels.report import (
    backward_steps,
    backward_steps_py,
    chain_depths,
    chain_depths_py,
    log2_histogram,
    log2_histogram_py,
)
from mqstore.storage.rocketmq.config_files import consumer_offsets
from mqstore.storage.rocketmq.report import rocketmq_report, verify_summary

T0 = 1_700_000_000_000
SLOTS, ITEMS = 64, 256  # a slots:items ratio the CLI detects from a file that is not full
SEG = 16 * 1024
# 16 distinct keys with one Java hashCode: "Aa" and "BB" hash alike, so do all their concatenations
COLLIDING = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=4)]


class Clock:
    """Store time: +10 ms a message; jumps back 5 s once, at message ``back_at``."""

    def __init__(self, back_at: int) -> None:
        self.n = 0
        self.t = T0
        self.back_at = back_at

    def __call__(self) -> int:
        self.n += 1
        self.t += -5000 if self.n == self.back_at else 10
        return self.t


def _config(clock=None) -> StoreConfig:
    kw = {"clock": clock} if clock is not None else {}
    return StoreConfig(commit_log_file_size=SEG, hash_slot_num=SLOTS, index_num=ITEMS, background_services=False,
                       consume_queue_file_size=20 * 100, **kw)


def _uniq(i: int) -> str:
    return hashlib.md5(str(i).encode()).hexdigest().upper()


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("shaped") / "store"
    clock = Clock(back_at=70)
    puts = []
    with MessageStore.open(root, _config(clock)) as s:
        n = 0
        for i in range(60):  # Orders, queues 0 and 1
            body = b"o" * (i * 7)
            r = s.put("Orders", body, queue_id=i % 2, keys=[f"order-{i}"], tags="TagA", uniq_key=_uniq(n))
            puts.append(("Orders", i % 2, body, r, 2))
            n += 1
        for i, k in enumerate(COLLIDING):  # the planted chain
            body = b"h" * (100 + i)
            r = s.put("Hot", body, queue_id=0, keys=[k], uniq_key=_uniq(n))
            puts.append(("Hot", 0, body, r, 2))
            n += 1
        for i in range(3):  # three keys each
            r = s.put("Multi", b"m", queue_id=3, keys=[f"a{i}", f"b{i}", f"c{i}"], uniq_key=_uniq(n))
            puts.append(("Multi", 3, b"m", r, 4))
            n += 1
    # ConsumeQueue of Orders/1 loses its last two units (a dispatch that fell behind)
    cq = root / "consumequeue" / "Orders" / "1"
    files = sorted(cq.iterdir())
    last = files[-1]
    data = bytearray(last.read_bytes())
    used = len(data.rstrip(b"\0"))
    used = -(-used // CQ_UNIT_SIZE) * CQ_UNIT_SIZE
    data[used - 2 * CQ_UNIT_SIZE : used] = bytes(2 * CQ_UNIT_SIZE)
    last.write_bytes(bytes(data))
    (root / "config").mkdir()
    # fastjson style: integer map keys without quotes; Orders/2 is a queue with no traffic
    (root / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"Orders@g1":{0:25,1:10,2:0},\n\t\t"Hot@g2":{0:16}\n\t}\n}')
    return {"root": root, "puts": puts}


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _reference_index(root: Path) -> tuple[dict[int, int], list[tuple[str, int, int]]]:
    """Pure-Python reference: chain length of every used slot (walked item by item)."""
    hist: dict[int, int] = {}
    per_slot: list[tuple[str, int, int]] = []
    for p in sorted((root / "index").iterdir()):
        buf = IndexFileBuffer(bytearray(p.read_bytes()), SLOTS, ITEMS)
        count = buf.header.index_count
        for s in range(SLOTS):
            head = int.from_bytes(buf.buf[40 + 4 * s : 44 + 4 * s], "big", signed=True)
            if not 0 < head < count:
                continue
            n, cur = 0, head
            while 0 < cur < count:
                n += 1
                prev = buf.read_item(cur)[3]
                if not 0 < prev < cur:
                    break
                cur = prev
            hist[n] = hist.get(n, 0) + 1
            per_slot.append((p.name, s, n))
    return hist, per_slot


def test_report_figures_exact(shaped: dict) -> None:
    root, puts = shaped["root"], shaped["puts"]
    before = _digest(root)
    r = rocketmq_report(root, _config())
    assert _digest(root) == before  # read-only
    cl = r["commitLog"]
    assert cl["messages"] == len(puts)
    assert cl["bytes"] == sum(p[3].size for p in puts)
    # store time went back once (the clock's jump), in the segment that holds that message
    steps = [i for i in range(1, len(puts)) if puts[i][3].store_timestamp < puts[i - 1][3].store_timestamp]
    assert len(steps) == 1
    back, before_back = puts[steps[0]][3], puts[steps[0] - 1][3]
    seg_of_back = (back.commit_log_offset // SEG) * SEG
    assert cl["timeBackwards"] == 1
    assert cl["timeBackwardsAt"] == [{"segment": f"{seg_of_back:020d}", "commitLogOffset": back.commit_log_offset,
                                      "storeTimestamp": back.store_timestamp,
                                      "previousStoreTimestamp": before_back.store_timestamp}]
    assert [s["timeBackwards"] for s in cl["segments"]] == [
        1 if s["fromOffset"] == seg_of_back else 0 for s in cl["segments"]]
    assert len(cl["segments"]) >= 2
    assert cl["firstStoreTimestamp"] == min(p[3].store_timestamp for p in puts)
    assert cl["lastStoreTimestamp"] == max(p[3].store_timestamp for p in puts)
    # topics and queues
    def tot(topic: str, q: int | None = None) -> tuple[int, int]:
        sel = [p for p in puts if p[0] == topic and (q is None or p[1] == q)]
        return len(sel), sum(p[3].size for p in sel)

    topics = {t["topic"]: (t["messages"], t["bytes"]) for t in r["topics"]}
    assert topics == {"Orders": tot("Orders"), "Hot": tot("Hot"), "Multi": tot("Multi")}
    queues = {(q["topic"], q["queueId"]): q for q in r["queues"]}
    assert set(queues) == {("Orders", 0), ("Orders", 1), ("Orders", 2), ("Hot", 0), ("Multi", 3)}
    assert queues[("Orders", 2)]["messages"] == 0  # the queue with no traffic
    assert (queues[("Orders", 0)]["messages"], queues[("Orders", 0)]["bytes"]) == tot("Orders", 0)
    assert queues[("Orders", 1)]["dispatchBehind"] == 2
    assert queues[("Orders", 1)]["consumeQueueMaxOffset"] == 28
    assert queues[("Orders", 1)]["commitLogNextOffset"] == 30
    assert [q["dispatchBehind"] for k, q in sorted(queues.items()) if k != ("Orders", 1)] == [0, 0, 0, 0]
    assert r["dispatch"]["behindMessages"] == 2
    # traffic series sum to the totals
    tr = r["traffic"]
    assert sum(sum(v) for v in tr["topics"]["messages"].values()) == len(puts)
    assert sum(tr["topics"]["bytes"]["Hot"]) == tot("Hot")[1]
    assert sum(tr["queues"]["messages"]["Orders/1"]) == 30
    # body sizes (power-of-two bins) and index keys per message
    bodies = [len(p[2]) for p in puts]
    assert r["bodySize"]["counts"] == log2_histogram_py(bodies, len(r["bodySize"]["counts"]))
    assert r["bodySize"]["max"] == max(bodies)
    assert r["keysPerMessage"] == {"2": 76, "4": 3}
    # consumers: fastjson's unquoted integer keys parsed, lag = max offset - committed
    groups = {(g["group"], g["topic"], g["queueId"]): (g["offset"], g["maxOffset"], g["lag"])
              for g in r["consumers"]["groups"]}
    assert groups == {("g1", "Orders", 0): (25, 30, 5), ("g1", "Orders", 1): (10, 28, 18),
                      ("g1", "Orders", 2): (0, 0, 0), ("g2", "Hot", 0): (16, 16, 0)}
    # checkpoint against the files
    assert r["checkpoint"]["lastCommitLogTimestamp"] == puts[-1][3].store_timestamp
    assert r["checkpoint"]["lastIndexTimestamp"] == max(f["endTimestamp"] for f in r["index"]["files"])


def test_report_index_chains(shaped: dict) -> None:
    root = shaped["root"]
    r = rocketmq_report(root, _config())
    idx = r["index"]
    hist, per_slot = _reference_index(root)
    assert idx["chainLengths"] == {str(k): v for k, v in sorted(hist.items())}
    planted = index_key_hash(f"Hot#{COLLIDING[0]}")
    assert len({java_string_hashcode(k) for k in COLLIDING}) == 1
    top = idx["longestChains"][0]
    assert top["hashes"][0] == {"hash": planted, "items": 16}
    assert top["slot"] == planted % SLOTS
    assert top["length"] == max(n for _, _, n in per_slot)
    assert top["length"] == next(n for f, s, n in per_slot if f == top["file"] and s == top["slot"])
    files = {f["name"]: f for f in idx["files"]}
    for name, f in files.items():
        used = {s for fn, s, _ in per_slot if fn == name}
        assert f["slotsUsed"] == len(used)
        assert f["slotFill"] == round(len(used) / SLOTS, 6)
    assert sum(f["items"] for f in files.values()) == 76 * 2 + 3 * 4
    assert [f["itemFill"] for f in idx["files"]] == [round(f["items"] / (ITEMS - 1), 6) for f in idx["files"]]


_RNG = np.random.default_rng(7)
_PREV = np.concatenate(([0], _RNG.integers(-3, 50, 400)))  # forward, self and negative links too
_PREV[10] = 10
_PREV[11] = 400


@pytest.mark.parametrize("depths", twins("report.chain_depths"))
def test_chain_depths(depths) -> None:
    assert list(np.asarray(depths(np.array([0, 0, 1, 2, 1, 9, 5]))).tolist()) == [0, 1, 2, 3, 2, 1, 2]
    assert list(np.asarray(depths(np.zeros(0, np.int64))).tolist()) == []
    assert np.asarray(depths(_PREV)).tolist() == chain_depths_py(_PREV)


@pytest.mark.parametrize("steps", twins("report.backward_steps"))
def test_backward_steps(steps) -> None:
    assert np.asarray(steps(np.array([5, 6, 6, 2, 9, 8]))).tolist() == [3, 5]
    t = _RNG.integers(0, 100, 300)
    assert np.asarray(steps(t)).tolist() == backward_steps_py(t)


@pytest.mark.parametrize("hist", twins("report.log2_histogram"))
def test_log2_histogram(hist) -> None:
    assert np.asarray(hist(np.array([0, 1, 2, 3, 4, 7, 8, 1 << 30]), 5)).tolist() == [1, 1, 2, 2, 2]
    v = _RNG.integers(0, 1 << 20, 500)
    assert np.asarray(hist(v, 24)).tolist() == log2_histogram_py(v, 24)
    assert np.asarray(chain_depths(_PREV)).tolist() == chain_depths_py(_PREV)
    assert np.asarray(backward_steps(v)).tolist() == backward_steps_py(v)
    assert np.asarray(log2_histogram(v, 24)).tolist() == log2_histogram_py(v, 24)


def test_consumer_offsets_reader(tmp_path: Path) -> None:
    """The report reads consumerOffset.json through the store's one reader (fastjson's bare keys)."""
    p = tmp_path / "config" / "consumerOffset.json"
    p.parent.mkdir()
    p.write_text('{"offsetTable":{"T@G":{"0":3,1:4}},"dataVersion":{"counter":1}}')
    assert consumer_offsets(tmp_path).table == {("T", "G"): {0: 3, 1: 4}}
    p.write_text('{"offsetTable":{"nogroup":{0:1}}}')
    with pytest.raises(CorruptDataError, match="is not <topic>@<group>"):
        consumer_offsets(tmp_path)
    p.write_text("{not json")
    with pytest.raises(CorruptDataError, match=r"consumerOffset\.json"):
        consumer_offsets(tmp_path)


def test_verify_summary_marks_the_bad_file(shaped: dict, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(shaped["root"], root)
    v = verify_summary(root, _config())
    assert v["ok"] and all(f["ok"] for f in v["files"])
    # flip a byte of a body in the first segment: its CRC fails
    seg = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    off = shaped["puts"][3][3].commit_log_offset
    data[off + 88] ^= 0xFF  # first body byte (IPv4 hosts: the body starts 88 bytes in)
    seg.write_bytes(bytes(data))
    v = verify_summary(root, _config())
    bad = [f["file"] for f in v["files"] if not f["ok"]]
    assert not v["ok"]
    assert f"commitlog/{seg.name}" in bad


def test_report_with_verify_equals_the_two_one_after_the_other(shaped: dict, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI computes the figures beside the verification: the same figures and summary as the
    two functions called one after the other; without --no-verify no summary; a verification
    error is raised as it would be alone."""
    import shutil

    from mqstore.errors import CorruptDataError
    from mqstore.storage.rocketmq import report as report_mod

    root = tmp_path / "store"
    shutil.copytree(shaped["root"], root)
    seg = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    data[shaped["puts"][3][3].commit_log_offset + 88] ^= 0xFF  # a body CRC fails: a non-empty summary
    seg.write_bytes(bytes(data))
    figures, summary, n_keys = report_mod.report_with_verify(root, _config(), then=len)
    assert figures == report_mod.rocketmq_report(root, _config())
    assert summary == verify_summary(root, _config()) and not summary["ok"]
    assert n_keys == len(figures)  # `then` ran on the figures
    assert report_mod.report_with_verify(root, _config(), verify=False)[1:] == (None, None)

    def broken(*_a: object, **_k: object) -> None:
        raise CorruptDataError("verification failed")

    monkeypatch.setattr(report_mod, "verify_summary", broken)
    with pytest.raises(CorruptDataError, match="verification failed"):
        report_mod.report_with_verify(root, _config())


def test_cli_report_json_html_png(shaped: dict, tmp_path: Path) -> None:
    root = shaped["root"]
    before = _digest(root)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["rocketmq", "report", str(root), "--html", str(out), "--png", str(tmp_path / "png"),
                                   "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["verify"]["ok"] is True
    assert doc["commitLog"]["messages"] == len(shaped["puts"])
    assert doc["index"]["geometry"] == {"slots": SLOTS, "items": ITEMS}  # detected from the files
    page = out.read_text()
    assert page.count('<figure id="') == 11 and page.count("<svg") == 11
    for ref in ('src="', 'href="http', "url(http", "<link", "@import"):  # nothing to fetch
        assert ref not in page
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == sorted(
        f"{n}.png" for n in ("index_fill", "chain_lengths", "traffic_topics_messages", "traffic_topics_bytes",
                             "traffic_queues_messages", "body_size", "keys_per_message", "queues", "consumer_lag",
                             "checkpoint", "segments"))
    assert _digest(root) == before


def test_cli_report_errors(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["rocketmq", "report", str(tmp_path / "missing"), "--json"])
    assert r.exit_code == 2 and r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(cli, ["rocketmq", "report", str(tmp_path)])
    assert r.exit_code == 2 and "--html" in r.output


def test_cli_does_not_import_matplotlib() -> None:
    import subprocess
    import sys

    code = ("import sys, mqstore.cli.main, mqstore.cli.rocketmq, mqstore.cli.kafka, mqstore.cli.report; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
