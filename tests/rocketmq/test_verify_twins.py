"""``verify_store`` (checks over columns) against ``verify_store_reference`` (one record, unit and
item at a time): the same problems in the same order and the same counts, on clean stores and on
stores with random damage to ConsumeQueue units, IndexFile items and headers, and CommitLog bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import MessageStore, StoreConfig
from mqstore.errors import MqStoreError
from mqstore.storage.rocketmq import verify as verify_module
from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference


def _config() -> StoreConfig:
    return StoreConfig(commit_log_file_size=16384, consume_queue_file_size=320, hash_slot_num=16, index_num=60,
                       background_services=False)


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("verify-twins") / "store"
    with MessageStore.open(root, _config()) as s:
        for i in range(150):
            keys = [f"k{i % 13}", f"u{i}"] if i % 5 else None  # some messages without keys
            s.put(("A", "B", "C")[i % 3], b"body-%d" % i * (1 + i % 4), i % 3, keys=keys, tags=f"t{i % 2}")
    return root


def _files(root: Path) -> dict[str, list[Path]]:
    return {
        "cq": sorted(f for f in (root / "consumequeue").rglob("0*") if f.is_file()),
        "index": sorted((root / "index").iterdir()),
        "commitlog": sorted((root / "commitlog").iterdir()),
    }


def _same(root: Path) -> None:
    fast = verify_store(root, _config())
    ref = verify_store_reference(root, _config())
    assert fast.problems == ref.problems
    assert (fast.messages, fast.cq_units, fast.ext_units, fast.index_items) == (
        ref.messages, ref.cq_units, ref.ext_units, ref.index_items)


@pytest.fixture(params=["default-steps", "small-steps"])
def steps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default sizes and kernels, or tiny scan batches and IndexFile item slices (so the small
    stores here cross every step boundary) with the numpy twins of the IndexFile check kernels."""
    if request.param == "small-steps":
        from mqstore.kernels.rocketmq import index_check, verify_check

        monkeypatch.setattr(verify_module, "_VERIFY_BATCH_RECORDS", 7)
        monkeypatch.setattr(verify_module, "_INDEX_ITEMS_PER_STEP", 5)
        monkeypatch.setattr(verify_module, "_VERIFY_CHUNK", 3)
        monkeypatch.setattr(index_check, "check_items", index_check.check_items_py)
        monkeypatch.setattr(index_check, "locate", index_check.locate_py)
        monkeypatch.setattr(verify_check, "check_units", verify_check.check_units_py)
        monkeypatch.setattr(verify_check, "cut", verify_check.cut_py)


def test_clean_store_gives_no_problem_in_both(base_store: Path, steps: None) -> None:
    _same(base_store)
    assert verify_store(base_store, _config()).ok


def test_empty_store_in_both(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s", _config()):
        pass
    _same(tmp_path / "s")


damage = st.lists(st.tuples(st.sampled_from(["cq", "cq", "index", "index", "index_header", "commitlog"]),
                            st.integers(0, 10**6), st.binary(min_size=1, max_size=8)), min_size=1, max_size=6)


@given(damage)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_damaged_stores_give_the_same_problems(base_store: Path, tmp_path: Path, steps: None, hits: list) -> None:
    root = tmp_path / "copy"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base_store, root)
    files = _files(root)
    for kind, where, data in hits:
        if kind == "index_header":
            path = files["index"][where % len(files["index"])]
            pos = where % 40
        else:
            group = files[kind]
            path = group[where % len(group)]
            size = path.stat().st_size
            if kind == "index":  # into the item range actually written
                pos = 40 + 16 * 4 + (where % (60 * 20))
            elif kind == "commitlog":
                pos = where % min(size, 6000)
            else:
                pos = where % max(size, 1)
        with open(path, "r+b") as fh:
            fh.seek(pos)
            fh.write(data[: max(path.stat().st_size - pos, 0)])
    try:
        ref = verify_store_reference(root, _config())
    except MqStoreError as exc:  # the store does not open (a typed error): the fast one must say the same
        with pytest.raises(type(exc)):
            verify_store(root, _config())
        return
    fast = verify_store(root, _config())
    assert fast.problems == ref.problems
    assert (fast.messages, fast.cq_units, fast.ext_units, fast.index_items) == (
        ref.messages, ref.cq_units, ref.ext_units, ref.index_items)


def test_index_count_past_the_capacity_is_a_verify_problem(base_store: Path, tmp_path: Path) -> None:
    """A damaged header counting more items than the file holds (found by the property test above:
    it made opening the store fail with a raw ``struct.error``) is reported by both verifiers."""
    root = tmp_path / "copy"
    shutil.copytree(base_store, root)
    last = sorted((root / "index").iterdir())[-1]
    with open(last, "r+b") as fh:
        fh.seek(36)
        fh.write((10**6).to_bytes(4, "big"))
    fast = verify_store(root, _config())
    assert fast.problems == verify_store_reference(root, _config()).problems
    assert any("indexCount 1000000 outside 1..60" in p for p in fast.problems)


def test_a_plain_store_is_checked_a_window_at_a_time(base_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No record table of the whole CommitLog for a store without RocksDB ConsumeQueue or time-index sidecar files."""
    def no_table(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole-table check ran")

    monkeypatch.setattr(verify_module, "_verify_table", no_table)
    monkeypatch.setattr(verify_module, "_VERIFY_BATCH_RECORDS", 11)
    assert verify_store(base_store, _config()).ok


@pytest.mark.parametrize("what", ["cq", "index"])
def test_units_and_items_out_of_offset_order(base_store: Path, tmp_path: Path, steps: None, what: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Units/items pointing behind their file's cursor (swapped, or far ahead of the next ones)
    are checked in a second scan: the same problems as the reference, in the same order."""
    root = tmp_path / "copy"
    shutil.copytree(base_store, root)
    if what == "cq":
        path, first, width = _files(root)["cq"][0], 0, 20
    else:
        path, first, width = _files(root)["index"][0], 40 + 16 * 4 + 20, 20
    with open(path, "r+b") as fh:
        fh.seek(first)
        a, b = fh.read(width), fh.read(width)
        fh.seek(first)
        fh.write(b + a)  # two neighbours swapped
        fh.seek(first + 3 * width + (0 if what == "cq" else 4))
        fh.write((10**12).to_bytes(8, "big"))  # one far past the end, before lower ones
    scans = []
    windows = verify_module._windows

    def counted(*args: object) -> object:
        scans.append(1)
        return windows(*args)

    monkeypatch.setattr(verify_module, "_windows", counted)
    _same(root)
    assert len(scans) == 2  # the second scan for the ones behind
    assert verify_store(root, _config()).problems
