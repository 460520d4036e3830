"""``mqstore --version`` answers without importing click, with click's text."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from mqstore.cli.main import cli


def test_version_without_click_matches_click() -> None:
    code = ("import sys; sys.argv = ['mqstore', '--version']\n"
            "from mqstore.cli.main import main\n"
            "import atexit; atexit.register(lambda: print('click' in sys.modules, file=sys.stderr))\n"
            "main()")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stderr.strip() == "False"
    assert r.stdout == CliRunner().invoke(cli, ["--version"]).output
