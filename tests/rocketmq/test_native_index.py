"""The native IndexFile kernels (``_nat_rmq_index``) against the numba kernels and the reference.

* key hashes (Java ``String.hashCode`` / ``indexKeyHashMethod``) of any text, surrogates and
  invalid UTF-8 included, over every implementation against the pure twins;
* the IndexFile bulk build over every implementation: the broker's fixture files byte for byte,
  and hypothesis key sets (full files, rolls, files resumed from a header), sequential and on
  several threads;
* a whole ``rocketmq rebuild-index`` under ``MQSTORE_KERNELS=numba`` and the default gives the
  same trees;
* the facades import no numba on the native path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.javahash import index_key_hash, java_bytes_hashcode, java_string_hashcode
from mqstore.kernels import javahash
from mqstore.kernels.backend import built
from mqstore.kernels.registry import kernel_impls
from mqstore.kernels.rocketmq import index_build
from mqstore.kernels.rocketmq.index_build import header_array
from mqstore.kernels.rocketmq.scan import scan_segment_py
from mqstore.storage.rocketmq.rebuild import compare_trees

from .helpers import CASES, build_index_files, concat_batches, index_inputs, load_case, scan_store

NATIVE = built("_nat_rmq_index") is not None
needs_native = pytest.mark.skipif(not NATIVE, reason="the native module _nat_rmq_index is not built")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# any text: every plane, lone surrogates included (Java hashes them as code units)
TEXT = st.text(st.characters(codec=None, blacklist_categories=()), max_size=12)


# ----------------------------------------------------------------------------- hashes
@SETTINGS
@given(strings=st.lists(TEXT, max_size=20))
def test_hash_strings_any_text(strings: list[str]) -> None:
    want = [java_string_hashcode(s) for s in strings]
    for kind, fn in kernel_impls("javahash.hash_strings").items():
        assert fn(strings).tolist() == want, kind
    keys = [f"T#{s}" for s in strings]
    for kind, fn in kernel_impls("javahash.index_hash_strings").items():
        assert fn(keys).tolist() == [index_key_hash(k) for k in keys], kind


@SETTINGS
@given(chunks=st.lists(st.binary(max_size=12) | TEXT.map(lambda s: s.encode("utf-8", "surrogatepass")), max_size=20),
       topic=st.text(max_size=6))  # fmt: skip
def test_hash_spans_any_bytes(chunks: list[bytes], topic: str) -> None:
    tb = topic.encode()
    buf = np.frombuffer(tb + b"".join(chunks) + b"\0", np.uint8)  # (never empty)
    lens = np.array([len(c) for c in chunks], np.int64)
    starts = len(tb) + np.cumsum(lens) - lens
    want = [java_bytes_hashcode(c) for c in chunks]
    ts, tl = np.zeros(len(chunks), np.int64), np.full(len(chunks), len(tb), np.int64)
    want_idx = [index_key_hash(f"{topic}#{c.decode('utf-8', 'replace')}") for c in chunks]
    for threads in (1, 2):
        for _, fn in kernel_impls("javahash.hash_spans").items():
            assert fn(buf, starts, lens, threads=threads).tolist() == want
        for _, fn in kernel_impls("javahash.index_hash_spans").items():
            assert fn(buf, ts, tl, starts, lens, threads=threads).tolist() == want_idx


@pytest.mark.parametrize("keys_fn", twins("javahash.index_hash_keys"))
@pytest.mark.parametrize("keys", [[], [""], ["a", "bb", ""], ["k\u00e9y", "\U0001f600", "\ud800x"], ["x" * 1000]])
def test_index_hash_keys_non_ascii(keys_fn: Any, keys: list[str]) -> None:
    assert keys_fn("Topic\u00e9", keys).tolist() == [index_key_hash(f"Topic\u00e9#{k}") for k in keys]


@pytest.mark.parametrize("joined", twins("javahash.hash_joined"))
def test_hash_joined_of_joined_keys(joined: Any) -> None:
    keys = ["", "a", "order-17", "x" * 300, "Aa", "BB"]
    kbuf, kstarts = javahash.join_keys_ascii(keys)  # type: ignore[misc]
    prefix = javahash.hash_prefix_state("T#")
    assert joined(kbuf, kstarts, prefix).tolist() == [index_key_hash(f"T#{k}") for k in keys]
    assert javahash.join_keys_ascii(["a\0b", "c"]) is None and javahash.join_keys_ascii(["\u00e9"]) is None


def test_hash_of_min_value_is_zero() -> None:
    # "polygenelubricants" hashes to Integer.MIN_VALUE: its index hash is 0 everywhere
    key = "polygenelubricants"
    assert java_string_hashcode(key) == -(2**31)
    for _, fn in kernel_impls("javahash.index_hash_strings").items():
        assert fn([key]).tolist() == [0]


# ----------------------------------------------------------------------------- bulk build
@pytest.fixture(scope="module", params=CASES)
def case_inputs(request: pytest.FixtureRequest) -> tuple[Any, tuple[np.ndarray, ...]]:
    case = load_case(request.param)
    return case, index_inputs(concat_batches(list(scan_store(case, scan_segment_py))))


def _parallel(put: Any) -> Any:
    def run(*args: Any) -> int:
        return put(*args, threads=3)
    return run


@pytest.mark.parametrize("put", [*twins("rocketmq.bulk_put"), *(pytest.param(_parallel(p.values[0]), id=f"{p.id}-t3")
                                                                 for p in twins("rocketmq.bulk_put_parallel"))])
def test_fixture_index_files_byte_for_byte(put: Any, case_inputs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_build, "PARALLEL_MIN_KEYS", 2)  # the threaded phases on these few keys
    case, (kh, phy, ts) = case_inputs
    slots, items = case.config["maxHashSlotNum"], case.config["maxIndexNum"]
    built_files = build_index_files(kh, phy, ts, slots, items, bulk_put=put)
    assert [name for name, _ in built_files] == [f["name"] for f in case.manifest["indexFiles"]]
    for name, data in built_files:
        assert data == case.store_file(f"index/{name}"), name


def _impls() -> list[tuple[str, Any]]:
    out = [(f"seq-{k}", fn) for k, fn in kernel_impls("rocketmq.bulk_put").items()]
    for k, fn in kernel_impls("rocketmq.bulk_put_parallel").items():
        for t in (2, 3):
            out.append((f"par{t}-{k}", lambda *a, _fn=fn, _t=t: _fn(*a, threads=_t)))
    return out


@SETTINGS
@given(
    slots=st.integers(1, 40),
    index_num=st.integers(2, 60),
    n=st.integers(0, 200),
    seed=st.integers(0, 2**32 - 1),
    pre=st.integers(0, 30),
    start=st.integers(0, 5),
)
def test_bulk_put_over_implementations(slots: int, index_num: int, n: int, seed: int, pre: int, start: int) -> None:
    """Random keys (hash MIN_VALUE and negative hashes included) put into a file that may already
    hold ``pre`` keys (a resumed file), rolling to fresh files while keys remain: every
    implementation, sequential and threaded, leaves the same bytes, headers and counts."""
    rng = np.random.default_rng(seed)
    kh = rng.integers(-(2**31), 2**31, n + pre).astype(np.int32)
    kh[rng.random(n + pre) < 0.05] = -(2**31)
    phy = np.cumsum(rng.integers(0, 300, n + pre)).astype(np.int64)
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(-400, 1500, n + pre)).astype(np.int64)
    size = index_file_size(slots, index_num)
    results = []
    old = index_build.PARALLEL_MIN_KEYS
    index_build.PARALLEL_MIN_KEYS = 2
    try:
        for name, put in _impls():
            # the resumed file: `pre` keys by the reference, then the implementation
            buf = np.zeros(size, np.uint8)
            ref = IndexFileBuffer(memoryview(buf), slots, index_num, load=False)
            for i in range(min(pre, index_num - 1)):
                ref.put_hash(int(kh[i]), int(phy[i]), int(ts[i]))
            header = header_array(ref.header)
            files = []
            i = min(pre, index_num - 1) + start
            i = min(i, len(kh))
            while True:
                got = put(buf, slots, index_num, header, kh, phy, ts, i)
                i += got
                files.append((buf.copy(), header.copy(), got))
                if i >= len(kh) or len(files) > 400:
                    break
                buf = np.zeros(size, np.uint8)
                header = np.array([header[1], header[1], header[3], header[3], 0, 1], np.int64)  # carry over
                buf[:40] = np.frombuffer(IndexHeader(*(int(v) for v in header)).encode(), np.uint8)
            results.append((name, files))
    finally:
        index_build.PARALLEL_MIN_KEYS = old
    first_name, first = results[0]
    for name, files in results[1:]:
        assert len(files) == len(first), (name, first_name)
        for (b1, h1, g1), (b2, h2, g2) in zip(first, files, strict=True):
            assert g1 == g2 and h1.tolist() == h2.tolist(), (name, first_name)
            assert np.array_equal(b1, b2), (name, first_name)


# ----------------------------------------------------------------------------- whole commands
def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess[bytes]:
    e = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "mqstore.cli.main", *args], capture_output=True, env=e,
                          stdin=subprocess.DEVNULL)  # fmt: skip


@needs_native
@pytest.mark.parametrize("case_name", CASES)
def test_rebuild_numba_and_native_trees_identical(case_name: str, tmp_path: Path) -> None:
    src = load_case(case_name).store
    store = tmp_path / "store"
    shutil.copytree(src, store)
    outs = {}
    for mode in ("numba", "auto"):
        out = tmp_path / f"out-{mode}"
        r = _cli(["rocketmq", "rebuild-index", str(store), "--out", str(out)], MQSTORE_KERNELS=mode)
        assert r.returncode == 0, r.stderr.decode()
        outs[mode] = out
    assert compare_trees(outs["numba"], outs["auto"]) == []
    assert compare_trees(outs["auto"], store, ("consumequeue", "index")) == []  # the broker's files
    for mode in ("numba", "auto"):
        r = _cli(["rocketmq", "verify", str(store)], MQSTORE_KERNELS=mode)
        assert r.returncode == 0, r.stderr.decode()


@needs_native
def test_rebuild_many_keys_numba_and_native_identical(tmp_path: Path) -> None:
    """A store whose bulk puts take the threaded path (more keys than PARALLEL_MIN_KEYS) and roll."""
    from .test_kernels_threads import _many_key_store

    store = _many_key_store(tmp_path / "store")
    outs = {}
    for mode in ("numba", "auto"):
        out = tmp_path / f"out-{mode}"
        code = ("import sys\nfrom mqstore import StoreConfig\nfrom mqstore.storage.rocketmq.rebuild import rebuild_indexes\n"
                "cfg = StoreConfig(commit_log_file_size=4 << 20, hash_slot_num=4099, index_num=90_001)\n"
                f"s = rebuild_indexes({str(store)!r}, {str(out)!r}, config=cfg, threads=2)\n"
                "assert s.index_files == 2, s\n")  # fmt: skip
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, env={**os.environ, "MQSTORE_KERNELS": mode})
        assert r.returncode == 0, r.stderr.decode()
        outs[mode] = out
    assert compare_trees(outs["numba"], outs["auto"]) == []


@needs_native
def test_facades_import_no_numba() -> None:
    code = (
        "import sys, numpy as np\n"
        "from mqstore.kernels import javahash\n"
        "from mqstore.kernels.rocketmq import index_build, index_view\n"
        "import mqstore.storage.rocketmq.index\n"
        "from mqstore.formats.rocketmq.indexfile import index_file_size\n"
        "assert javahash.hash_spans.__name__ == 'hash_spans_native'\n"
        "assert index_build.bulk_put_parallel.__name__ == 'bulk_put_parallel_native'\n"
        "javahash.index_hash_keys('T', ['a', 'b\\u00e9'])\n"
        "buf = np.zeros(index_file_size(7, 1 << 17), np.uint8)\n"
        "h = np.array([0, 0, 0, 0, 0, 1], np.int64)\n"
        "n = 100_000\n"
        "index_build.bulk_put_parallel(buf, 7, 1 << 17, h, np.arange(n, dtype=np.int32), np.arange(n), np.arange(n),"
        " threads=2)\n"
        "print(sorted(m for m in sys.modules if m == 'numba' or m.startswith(('numba.', 'llvmlite'))))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_numba_mode_binds_numba() -> None:
    code = ("from mqstore.kernels import javahash\nfrom mqstore.kernels.rocketmq import index_build\n"
            "print(javahash.hash_spans.__name__, index_build.bulk_put.__name__)")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "MQSTORE_KERNELS": "numba"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["hash_spans_numba", "bulk_put_numba"]


def test_numba_building_blocks_still_reachable_from_the_facade() -> None:
    from mqstore.kernels import javahash_nb

    assert javahash.hash_continue is javahash_nb.hash_continue
    with pytest.raises(AttributeError):
        javahash.no_such_name  # noqa: B018


# ----------------------------------------------------------------------------- verify's IndexFile checks
@pytest.mark.parametrize("locate", twins("rocketmq.locate"))
@SETTINGS
@given(starts=st.lists(st.integers(0, 500), max_size=40, unique=True), offsets=st.lists(st.integers(-5, 510), max_size=60),
       ascending=st.booleans())  # fmt: skip
def test_locate_is_searchsorted(locate: Any, starts: list[int], offsets: list[int], ascending: bool) -> None:
    a = np.array([*sorted(starts), -1], np.int64)  # a sentinel row past n, as verify's columns have
    x = np.array(sorted(offsets) if ascending else offsets, np.int64)
    assert locate(a, len(starts), x).tolist() == np.searchsorted(a[: len(starts)], x).tolist()


def _item(h: int, phy: int, diff: int, prev: int) -> bytes:
    return h.to_bytes(4, "big", signed=True) + phy.to_bytes(8, "big", signed=True) + \
        diff.to_bytes(4, "big", signed=True) + prev.to_bytes(4, "big", signed=True)  # fmt: skip


@pytest.mark.parametrize("check", twins("rocketmq.check_items"))
def test_check_items_codes(check: Any) -> None:
    from mqstore.kernels.rocketmq.index_check import (
        BAD_LINK,
        HASH_NOT_A_KEY,
        NEGATIVE_DIFF,
        NOT_A_KEYED_RECORD,
        TIME_MISMATCH,
    )

    begin = 1_700_000_000_000
    starts = np.array([100, 200, 300, 400, -1], np.int64)  # record 2 (offset 300) has no keys
    splits = np.array([0, 2, 3, 3, 5], np.int64)
    keys = np.array([11, 12, 21, 41, 42], np.int64) | (np.array([0, 0, 1, 3, 3]) << 32)  # verify's pairs
    store_ts = np.array([begin, begin + 1500, begin + 2000, begin - 5000, -1], np.int64)
    items = [
        _item(11, 100, 0, 0),  # item 1: the time quirk of the first item is not checked
        _item(12, 100, 0, 1),  # ok
        _item(21, 200, 1, 0),  # ok (1.5 s -> 1)
        _item(99, 200, 1, 2),  # hash of no key
        _item(21, 200, 7, 3),  # wrong time
        _item(21, 300, 2, 9),  # a record without keys, and a link to a newer item
        _item(21, 250, -1, 0),  # not a record start, negative time difference
        _item(41, 400, 0, 0),  # store time before the begin: 0
        _item(42, 50, 3, 0),  # below cl_min: only links and times are checked
        _item(-7, 999, 0, -1),  # past the last record; negative link
    ]
    codes = check(b"".join(items), len(items), begin, 60, starts, 4, splits, keys, store_ts)
    assert codes.tolist() == [0, 0, 0, HASH_NOT_A_KEY, TIME_MISMATCH, NOT_A_KEYED_RECORD | BAD_LINK,
                              NOT_A_KEYED_RECORD | NEGATIVE_DIFF, 0, 0, NOT_A_KEYED_RECORD | BAD_LINK]  # fmt: skip
    # no begin timestamp: every time difference must be 0
    assert check(b"".join(items[:3]), 3, 0, 0, starts, 4, splits, keys, store_ts).tolist() == [0, 0, TIME_MISMATCH]
    assert check(b"", 0, begin, 0, starts[:0], 0, splits[:1], keys[:0], store_ts[:0]).tolist() == []
    # a slice of items numbered from 10: links checked against those numbers
    assert check(b"".join(items[4:6]), 2, begin, 60, starts, 4, splits, keys, store_ts, 10).tolist() == [
        TIME_MISMATCH, NOT_A_KEYED_RECORD]


@pytest.mark.parametrize("check", twins("rocketmq.check_items"))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 30), count=st.integers(0, 60), begin=st.sampled_from([0, 5000]))
def test_check_items_random(check: Any, seed: int, n: int, count: int, begin: int) -> None:
    rng = np.random.default_rng(seed)
    starts = np.append(np.sort(rng.choice(1000, n, replace=False)).astype(np.int64), -1)
    counts = rng.integers(0, 3, n)
    splits = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = rng.integers(-2, 4, int(splits[-1])).astype(np.int64) & 0xFFFFFFFF
    store_ts = np.append(rng.integers(0, 20_000, n), -1).astype(np.int64)
    phy = np.sort(rng.choice(np.append(starts[:n], rng.integers(0, 1000, 4)), count)) if n else rng.integers(0, 9, count)
    if rng.random() < 0.3:
        rng.shuffle(phy)
    raw = b"".join(_item(int(rng.integers(-2, 4)), int(p), int(rng.integers(-1, 20)), int(rng.integers(-1, count + 9)))
                   for p in phy)  # fmt: skip
    first = int(rng.integers(1, 9))
    want = kernel_impls("rocketmq.check_items").reference(raw, count, begin, 3, starts, n, splits, keys, store_ts, first)
    assert check(raw, count, begin, 3, starts, n, splits, keys, store_ts, first).tolist() == want.tolist()


# ----------------------------------------------------------------------------- the keys of a batch
@pytest.mark.parametrize("keys_of", twins("rocketmq.index_keys"))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), k=st.integers(0, 80), resume=st.integers(-1, 12),
       skip=st.integers(0, 4))  # fmt: skip
def test_index_keys_of_a_batch(keys_of: Any, seed: int, n: int, k: int, resume: int, skip: int) -> None:
    from mqstore.kernels.rocketmq.index_build import BatchKeys

    rng = np.random.default_rng(seed)
    rows = np.sort(rng.integers(0, max(n, 1), k if n else 0)).astype(np.int64)
    b = BatchKeys(rows, rng.integers(-5, 5, len(rows)).astype(np.int32), rng.choice([0, 4, 8, 12, 13], n).astype(np.int32),
                  np.sort(rng.integers(0, 15, n)).astype(np.int64), rng.integers(0, 99, n).astype(np.int64))  # fmt: skip
    got = keys_of(b, resume, skip)
    want = kernel_impls("rocketmq.index_keys").reference(b, resume, skip)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]
    assert [a.dtype for a in got] == [np.int32, np.int64, np.int64]
