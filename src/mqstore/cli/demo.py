"""`mqstore demo`: the main job on the embedded default."""

from __future__ import annotations

import click


@click.command()
@click.option("--data", default="./mqstore-data", show_default=True, help="Where the sample store is created.")
def demo(data: str) -> None:
    """Create a sample store, put messages, query them by key, offset and time."""
    raise click.ClickException("not implemented yet")
