"""The ``mqstore`` click group (commands imported when first used); the entry point is
:mod:`mqstore.cli.main`."""

from __future__ import annotations

import importlib

import click

from mqstore import __version__

# Command groups are imported when first used: a one-shot command (say ``mqstore rocketmq
# rebuild-index``) must not pay for the imports of the others (Spark, Kafka, the demo).
_LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "rocketmq": ("mqstore.cli.rocketmq", "group"),
    "kafka": ("mqstore.cli.kafka", "group"),
    "spark": ("mqstore.cli.spark", "group"),
    "demo": ("mqstore.cli.demo", "demo"),
    "warm-up": ("mqstore.cli.warmup", "warm_up"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in _LAZY_COMMANDS:
            module, attr = _LAZY_COMMANDS[cmd_name]
            cmd = getattr(importlib.import_module(module), attr)
            self.add_command(cmd, cmd_name)
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mqstore")
def cli() -> None:
    """mqstore: RocketMQ- and Kafka-compatible message-log storage, offline tools and Spark jobs."""


