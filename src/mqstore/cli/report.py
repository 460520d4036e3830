"""``mqstore rocketmq report`` and ``mqstore kafka report``: a store health report as one
self-contained HTML page, JSON, and/or PNG plots.

The figures come from :mod:`mqstore.storage.rocketmq.report` / :mod:`mqstore.storage.kafka.report`
(vectorised scans); the page and the images from :mod:`mqstore.cli.report_html` (matplotlib,
imported only when a page or an image is asked for).  Read-only: no file of the store changes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from mqstore.cli.common import handle_errors, progress, to_json
from mqstore.cli.rocketmq_store import commitlog_options
from mqstore.errors import InvalidArgumentError


def _outputs(html_out: Path | None, png_dir: Path | None, as_json: bool) -> None:
    if html_out is None and png_dir is None and not as_json:
        raise InvalidArgumentError("give at least one of --html OUT.html, --png DIR or --json")


def _emit(report: dict[str, Any], verify: dict[str, Any] | None, html_out: Path | None, png_dir: Path | None,
          as_json: bool, figures: list[str] | None = None) -> None:
    if html_out is not None or png_dir is not None:
        from mqstore.cli import report_html

        if html_out is not None:
            html_out.parent.mkdir(parents=True, exist_ok=True)
            html_out.write_text(report_html.render_html(report, verify, figures), encoding="utf-8")
        if png_dir is not None:
            report_html.write_pngs(report, png_dir)
    if as_json:
        click.echo(to_json({"verify": verify, **report}))
    else:
        if html_out is not None:
            click.echo(f"report written to {html_out}")
        if png_dir is not None:
            click.echo(f"plots written to {png_dir}")
        if verify is not None and not verify["ok"]:
            click.echo(f"verify: {verify['problems']} problem(s) (see the report)")


_common = [
    click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="Write the report as one self-contained HTML page here."),
    click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Write every plot as DIR/NAME.png."),
    click.option("--json", "as_json", is_flag=True, help="Print the figures (and the verify summary) as one JSON object."),
    click.option("--no-verify", is_flag=True, help="Skip the verify pass (no summary at the top)."),
]


def _apply(f: Any) -> Any:
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.command("report")
@click.argument("store", type=click.Path(file_okay=False, path_type=Path))
@_apply
@click.option("--file-reserved-hours", type=click.FloatRange(min=0), default=None,
              help="fileReservedTime of the broker (default 72) for the retention figures.")
@click.option("--slots", type=click.IntRange(min=1), default=None, help="IndexFile hash slots (default: detected).")
@click.option("--items", type=click.IntRange(min=2), default=None, help="IndexFile items (default: detected).")
@commitlog_options
@handle_errors
def rocketmq_report(store: Path, html_out: Path | None, png_dir: Path | None, as_json: bool, no_verify: bool,
                    file_reserved_hours: float | None, slots: int | None, items: int | None) -> None:
    """Health report of a RocketMQ store: IndexFile fill and hash chains, traffic per topic and
    queue, body sizes, dispatch and consumer lag, checkpoint, segment timeline, verify summary."""
    from mqstore.cli.rocketmq_store import store_config
    from mqstore.storage.rocketmq.report import report_with_verify

    _outputs(html_out, png_dir, as_json)
    cfg = store_config(store, slots=slots, items=items)
    draw = None
    if html_out is not None:
        from mqstore.cli import report_html

        draw = report_html.render_figures  # drawn in the figures' thread while verify runs
    with progress("verify" if not no_verify else "report") as prog:
        report, verify, figures = report_with_verify(store, cfg, verify=not no_verify, progress=prog,
                                                     file_reserved_hours=file_reserved_hours, then=draw)
    _emit(report, verify, html_out, png_dir, as_json, figures)
    sys.exit(0 if verify is None or verify["ok"] else 1)


@click.command("report")
@click.argument("path", type=click.Path(path_type=Path))
@_apply
@click.option("--index-interval-bytes", type=click.IntRange(min=0), default=4096, show_default=True,
              help="index.interval.bytes of the topic (the expected index density).")
@handle_errors
def kafka_report(path: Path, html_out: Path | None, png_dir: Path | None, as_json: bool, no_verify: bool,
                 index_interval_bytes: int) -> None:
    """Health report of a partition or a log directory: segment timeline, index density, time
    breaks, batch sizes, compression ratio, records/s, producers and transactions, recovery point."""
    from mqstore.storage.kafka.report import kafka_report as compute
    from mqstore.storage.kafka.report import verify_summary

    _outputs(html_out, png_dir, as_json)
    verify = None
    if not no_verify:
        with progress("verify") as prog:
            verify = verify_summary(path, progress=prog)
    with progress("report") as prog:
        report = compute(path, index_interval_bytes=index_interval_bytes, progress=prog)
    _emit(report, verify, html_out, png_dir, as_json)
    sys.exit(0 if verify is None or verify["ok"] else 1)
