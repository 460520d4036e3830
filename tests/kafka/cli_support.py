"""Running ``mqstore`` CLI invocations in a child process on a chosen kernel backend (the tests
that compare the native and numba kernels' outputs, and what a command imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from mqstore.kernels import backend

#: runs CLI invocations in one process and prints their results as JSON, plus whether numba and
#: numpy were loaded by the end
RUNNER = """
import json, sys
from click.testing import CliRunner
from mqstore.cli.main import cli
out = []
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(cli, args)
    out.append({"code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                "error": None if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)})
print(json.dumps({"results": out, "numba": any(m == "numba" or m.startswith("numba.") for m in sys.modules),
                  "numpy": "numpy" in sys.modules}))
"""


def kernel_env(mode: str | None) -> dict[str, str]:
    """This process's environment with the kernel backend set to ``mode`` (None: the default)."""
    env = {k: v for k, v in os.environ.items() if k != backend.ENV}
    if mode is not None:
        env[backend.ENV] = mode
    return env


def run_cli_jobs(jobs: list[list[str]], mode: str | None) -> dict[str, Any]:
    """Every CLI invocation of ``jobs`` in one child process on the ``mode`` kernels."""
    r = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs)], capture_output=True, text=True,
                       env=kernel_env(mode), check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
