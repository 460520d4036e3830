"""`mqstore spark pack-env`: what the archive for `--archives` holds (the cluster test ships a
full one to a real standalone cluster)."""

from __future__ import annotations

import json
import stat
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.errors import InvalidArgumentError
from mqstore.spark import pack
from mqstore.spark.pack import pack_environment, requirement_closure


def test_closure_holds_every_compiled_dependency_and_no_spark() -> None:
    names = requirement_closure()
    for name in ("mqstore", "numpy", "numba", "llvmlite", "pyarrow", "pandas", "crc32c", "isal", "lz4", "cramjam",
                 "zstandard", "click", "rich"):
        assert name in names
    assert "pyspark" not in names and "py4j" not in names
    assert "pytest" not in names and "hypothesis" not in names  # the test extra is not shipped


@pytest.mark.parametrize("name", ["env.tar", "env.zip", "env"])
def test_only_archives_spark_unpacks_with_file_modes(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\.tar\.gz or \.tgz"):
        pack_environment(tmp_path / name)


def test_archive_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.prefix == sys.base_prefix:
        pytest.fail("the tests run in the project's virtual environment (.venv)")
    monkeypatch.setattr(pack, "requirement_closure", lambda: ["lz4", "mqstore"])  # a small archive
    out = tmp_path / "env.tgz"
    r = CliRunner().invoke(cli, ["spark", "pack-env", str(out), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["distributions"] == ["lz4", "mqstore"] and res["out"] == str(out)
    site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["pyvenv.cfg"].isfile() and members["bin"].isdir()
    exe = members[f"bin/python{sys.version_info[0]}.{sys.version_info[1]}"]
    assert exe.isfile() and exe.mode & stat.S_IXUSR  # a copy: Spark unpacks no link leaving the archive
    assert all(not m.issym() or "/" not in m.linkname for m in members.values())
    assert f"{site}/mqstore/__init__.py" in members and f"{site}/mqstore/spark/cluster.py" in members
    assert any(n.startswith(f"{site}/lz4/") for n in members)
    assert not any(n.startswith(f"{site}/numpy/") for n in members)
    r = CliRunner().invoke(cli, ["spark", "pack-env", str(out)])
    assert r.exit_code == 2 and "exists" in r.output
