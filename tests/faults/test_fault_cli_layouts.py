"""Hostile CLI inputs (issue 18): a directory that is not a store of the command's layout (empty,
the other layout's), a file where a directory is expected, an output path that is a file.  Every
command of both layouts answers with one ``error:`` line and exit status 2, and changes no file."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore import MessageStore, StoreConfig
from mqstore.cli.main import cli
from mqstore.errors import StoreNotFoundError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROCKETMQ_COMMANDS = [
    ["inspect"], ["dump"], ["dump", "--json"], ["get", "--topic", "T", "--queue", "0", "--offset", "0"],
    ["query-key", "--topic", "T", "--key", "k"], ["query-time", "--topic", "T", "--queue", "0", "--timestamp", "0"],
    ["verify"], ["rebuild-index", "--out", "{out}"], ["rebuild-index"],
]
KAFKA_COMMANDS = [["dump"], ["verify"], ["rebuild-index", "--out", "{out}"], ["rebuild-index"],
                  ["lookup", "--offset", "0"], ["lookup", "--timestamp", "0"]]


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "empty").mkdir()
    shutil.copytree(FIXTURES / "kafka" / "single_default" / "segments", tmp_path / "kafka-partition")
    shutil.copytree(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "rocketmq-store")
    (tmp_path / "a-file").write_bytes(b"not a store\n")
    (tmp_path / "clog-file").mkdir()
    (tmp_path / "clog-file" / "commitlog").write_bytes(b"")
    return {p.name: p for p in tmp_path.iterdir()}


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def one_error_line(args: list[str]) -> str:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, res.stderr)
    assert res.stdout == "", (args, res.stdout)
    return lines[0]


@pytest.mark.parametrize("command", ROCKETMQ_COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("target", ["empty", "kafka-partition", "a-file", "clog-file"])
def test_rocketmq_commands_refuse_what_is_not_a_rocketmq_store(places: dict[str, Path], tmp_path: Path,
                                                               command: list[str], target: str) -> None:
    before = tree_digest(tmp_path)
    args = ["rocketmq", command[0], str(places[target]), *(a.format(out=tmp_path / "out") for a in command[1:])]
    line = one_error_line(args)
    assert str(places[target]) in line
    assert tree_digest(tmp_path) == before  # nothing created, nothing changed


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("target", ["empty", "rocketmq-store", "a-file"])
def test_kafka_commands_refuse_what_is_not_a_kafka_partition(places: dict[str, Path], tmp_path: Path,
                                                             command: list[str], target: str) -> None:
    before = tree_digest(tmp_path)
    args = ["kafka", command[0], str(places[target]), *(a.format(out=tmp_path / "out") for a in command[1:])]
    one_error_line(args)
    assert tree_digest(tmp_path) == before


def test_rocketmq_dump_of_an_empty_directory_is_an_error(places: dict[str, Path]) -> None:
    assert "has no commitlog/ directory" in one_error_line(["rocketmq", "dump", str(places["empty"])])


def test_rocketmq_inspect_of_a_kafka_partition_is_an_error(places: dict[str, Path]) -> None:
    assert "a Kafka partition directory" in one_error_line(["rocketmq", "inspect", str(places["kafka-partition"])])


@pytest.mark.parametrize("part", ["kafka-partition", "kafka-partition/00000000000000000000.log"])
def test_kafka_rebuild_index_out_an_existing_file_is_an_error(places: dict[str, Path], tmp_path: Path,
                                                              part: str) -> None:
    before = tree_digest(tmp_path)
    line = one_error_line(["kafka", "rebuild-index", str(tmp_path / part), "--out", str(places["a-file"])])
    assert "not a directory" in line
    assert tree_digest(tmp_path) == before


def test_rocketmq_rebuild_index_out_an_existing_file_is_an_error(places: dict[str, Path], tmp_path: Path) -> None:
    before = tree_digest(tmp_path)
    line = one_error_line(["rocketmq", "rebuild-index", str(places["rocketmq-store"]), "--out", str(places["a-file"])])
    assert "not a directory" in line
    assert tree_digest(tmp_path) == before


def test_an_empty_commitlog_directory_is_an_empty_store(places: dict[str, Path]) -> None:
    """The rule is the commitlog/ directory: a store that never got a message is still a store."""
    store = places["empty"]
    (store / "commitlog").mkdir()
    res = CliRunner().invoke(cli, ["rocketmq", "dump", "--json", str(store)])
    assert res.exit_code == 0 and res.stdout == ""
    res = CliRunner().invoke(cli, ["rocketmq", "verify", str(store)])
    assert res.exit_code == 0, res.output


def test_library_refuses_to_read_or_create_a_store_in_another_layout(places: dict[str, Path]) -> None:
    part = places["kafka-partition"]
    before = tree_digest(part)
    for read_only, create in ((True, True), (False, False), (False, True)):
        with pytest.raises(StoreNotFoundError, match="Kafka partition directory"):
            MessageStore.open(part, StoreConfig(background_services=False), read_only=read_only, create=create)
    assert tree_digest(part) == before
    with pytest.raises(StoreNotFoundError, match="has no commitlog/ directory"):
        MessageStore.open(places["empty"], read_only=True)
    with MessageStore.open(places["empty"], StoreConfig(background_services=False)) as s:  # writable: creates
        assert s.put("T", b"x").queue_offset == 0


def test_a_store_created_without_messages_is_a_store(tmp_path: Path) -> None:
    """A writable open makes the commitlog/ directory at once: a store closed (or killed) before
    its first message is an empty store for every reader, not 'not a RocketMQ store'."""
    MessageStore.open(tmp_path / "new", StoreConfig(background_services=False)).close()
    assert (tmp_path / "new" / "commitlog").is_dir()
    res = CliRunner().invoke(cli, ["rocketmq", "verify", str(tmp_path / "new")])
    assert res.exit_code == 0, res.output
