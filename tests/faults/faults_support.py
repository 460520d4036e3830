"""Helpers of the fault campaigns: load the campaign scripts of ``tools/`` as modules."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"


def load_tool(name: str) -> ModuleType:
    """Import ``tools/<name>.py`` (the long-run scripts share their code with these tests)."""
    mod_name = f"mqstore_tools_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def env_int(name: str, default: int) -> int:
    """A bounded CI default that a long run overrides through the environment."""
    return int(os.environ.get(name, str(default)))
