"""Entry point of the ``mqstore`` command."""

from __future__ import annotations

import click

from mqstore import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mqstore")
def cli() -> None:
    """mqstore: RocketMQ- and Kafka-compatible message-log storage, offline tools and Spark jobs."""


def _register() -> None:
    from mqstore.cli import demo, kafka, rocketmq, spark

    cli.add_command(rocketmq.group)
    cli.add_command(kafka.group)
    cli.add_command(spark.group)
    cli.add_command(demo.demo)


_register()


def main() -> None:
    cli(prog_name="mqstore")


if __name__ == "__main__":
    main()
