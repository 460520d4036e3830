"""``mqstore warm-up`` (run by scripts/setup.sh): it drives every common path once, so it must
succeed on a fresh install, write nothing outside its temporary directory, and leave the kernels
compiled (a later call of a kernel does not compile again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli


def test_warm_up_runs_every_path_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # take TMPDIR into account in this process
    cwd_before = sorted(os.listdir("."))
    res = CliRunner().invoke(cli, ["warm-up"])
    assert res.exit_code == 0, res.output
    assert "500 RocketMQ messages, 480 Kafka records" in res.output
    assert list(tmp_path.iterdir()) == []  # its temporary directory is gone
    assert sorted(os.listdir(".")) == cwd_before


def test_warm_up_leaves_the_kernels_compiled() -> None:
    """After a warm-up, a new process loads a kernel from numba's cache instead of compiling it."""
    import subprocess
    import sys

    res = CliRunner().invoke(cli, ["warm-up"])
    assert res.exit_code == 0, res.output
    probe = (
        "from mqstore.kernels.kafka.batches_nb import _scan_count\n"
        "from mqstore.kernels.kafka.batches import scan_batches_numba as scan_batches\n"
        "from mqstore.formats.kafka.batch import SimpleRecord, encode_batch\n"
        "scan_batches(memoryview(encode_batch([SimpleRecord(value=b'x', timestamp=1)])))\n"
        "print(sum(_scan_count.stats.cache_hits.values()), sum(_scan_count.stats.cache_misses.values()))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    hits, misses = int(out[0]), int(out[1])
    assert hits >= 1 and misses == 0
