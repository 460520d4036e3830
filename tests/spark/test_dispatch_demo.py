"""`mqstore demo`, the main job, with a small store (CliRunner, in the test session)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mqstore.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_demo_small(spark, tmp_path: Path) -> None:
    code, out, err = run("demo", "--data", str(tmp_path / "data"), "--messages", "400", "--master", "local[2]")
    assert code == 0, out + err
    assert "NO" not in out
    for line in ("local rebuild", "Spark rebuild", "indexes kept by the stream", "query-keys", "query by time"):
        assert line in out, line
    assert out.count("yes") >= 5
    assert (tmp_path / "data" / "report.html").read_text().count("<svg") == 11
