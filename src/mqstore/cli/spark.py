"""`mqstore spark ...` commands."""

from __future__ import annotations

import click


@click.group(name="spark")
def group() -> None:
    """Commands for the spark layer."""
