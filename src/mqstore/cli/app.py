"""The ``mqstore`` click group (commands imported when first used); the entry point is
:mod:`mqstore.cli.main`."""

from __future__ import annotations

import click

from mqstore import __version__
from mqstore.cli.common import LazyGroup

# Command groups are imported when first used: a one-shot command (say ``mqstore rocketmq
# rebuild-index``) must not pay for the imports of the others (Spark, Kafka, the demo).
_LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "rocketmq": ("mqstore.cli.rocketmq", "group"),
    "kafka": ("mqstore.cli.kafka", "group"),
    "spark": ("mqstore.cli.spark", "group"),
    "demo": ("mqstore.cli.demo", "demo"),
    "warm-up": ("mqstore.cli.warmup", "warm_up"),
}


@click.group(cls=LazyGroup, lazy=_LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mqstore")
def cli() -> None:
    """mqstore: RocketMQ- and Kafka-compatible message-log storage, offline tools and Spark jobs."""


