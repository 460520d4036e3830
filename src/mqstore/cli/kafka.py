"""`mqstore kafka ...` commands."""

from __future__ import annotations

import click


@click.group(name="kafka")
def group() -> None:
    """Commands for the kafka layer."""
