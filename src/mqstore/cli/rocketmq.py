"""`mqstore rocketmq ...` commands."""

from __future__ import annotations

import click


@click.group(name="rocketmq")
def group() -> None:
    """Commands for the rocketmq layer."""
