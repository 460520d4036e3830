"""Draw the figures of a store report (a dict from :mod:`mqstore.storage.rocketmq.report` or
:mod:`mqstore.storage.kafka.report`) and write them as one self-contained HTML page (every plot an
inline SVG: no script, no network) or as PNG files.

Plots are made with matplotlib's object API (``Figure``, the ``Agg`` canvas for PNG, the SVG
writer for the page: no display, no pyplot state); SVG text stays text (``svg.fonttype`` none:
the browser's sans-serif font draws it, nothing is fetched).  matplotlib is imported here only, and this module only by the
``report`` commands: no other command pays for the import.
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Figure = Any  # matplotlib.figure.Figure (imported lazily)
PlotSpec = tuple[str, str, Callable[[Any], None]]  # (name, title, draw(ax))

_GREEN = "#1a7f37"
_RED = "#cf222e"


def _figure_class() -> Any:
    """matplotlib's ``Figure`` with the report's settings (the object API: no pyplot, no figure
    manager; every figure is drawn on an Agg canvas or written as SVG)."""
    import matplotlib

    matplotlib.rcParams.update({"svg.fonttype": "none", "font.family": "sans-serif", "figure.dpi": 100,
                                "font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "svg.hashsalt": "mqstore"})
    from matplotlib.figure import Figure

    return Figure


def _ts(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="#555")
    ax.set_xticks([])
    ax.set_yticks([])


def _bars(ax: Any, labels: list[str], values: list[float], *, color: str = "C0", log: bool = False,
          horizontal: bool = False) -> None:
    idx = list(range(len(labels)))
    if horizontal:
        ax.barh(idx, values, color=color)
        ax.set_yticks(idx, labels, fontsize=7)
        ax.invert_yaxis()
    else:
        ax.bar(idx, values, color=color)
        ax.set_xticks(idx, labels, rotation=60 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center",
                      fontsize=7)
    if log and any(v > 0 for v in values):
        (ax.set_xscale if horizontal else ax.set_yscale)("log")


def _size_label(v: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= f:
            return f"{v // f}{unit}"
    return str(v)


def _log2_hist(ax: Any, edges: list[int], counts: list[int], xlabel: str) -> None:
    last = max((i for i, c in enumerate(counts) if c), default=-1)
    if last < 0:
        _no_data(ax, "no data")
        return
    first = min(i for i, c in enumerate(counts) if c)
    labels = [f"≥{_size_label(edges[i])}" if i else "0" for i in range(first, last + 1)]
    _bars(ax, labels, counts[first : last + 1])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")


def _stacked(ax: Any, traffic: dict[str, Any], series: dict[str, list[int]], ylabel: str) -> None:
    if not series or not traffic.get("bins"):
        _no_data(ax, "no messages")
        return
    import matplotlib.dates as mdates

    start, width, n = traffic["start"], traffic["binMs"], traffic["bins"]
    xs = [_dt.datetime.fromtimestamp((start + i * width) / 1000, tz=_dt.UTC) for i in range(n)]
    names = list(series)
    if n == 1:  # one bin: draw it as a short step so the area has a width
        xs = [xs[0], _dt.datetime.fromtimestamp((start + width) / 1000, tz=_dt.UTC)]
        ys = [series[k] * 2 for k in names]
    else:
        ys = [series[k] for k in names]
    ax.stackplot(xs, ys, labels=names, alpha=0.85)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M:%S"))
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax.set_ylabel(f"{ylabel} per {width // 1000} s")
    ax.legend(loc="upper left", fontsize=7, ncol=2)


# ----------------------------------------------------------------------------- RocketMQ plots
def rocketmq_plots(r: dict[str, Any]) -> list[PlotSpec]:
    idx = r["index"]
    traffic = r["traffic"]

    def index_fill(ax: Any) -> None:
        files = idx["files"]
        if not files:
            _no_data(ax, "no IndexFiles")
            return
        xs = list(range(len(files)))
        ax.bar([x - 0.2 for x in xs], [f["slotFill"] * 100 for f in files], width=0.4, label="slots used %")
        ax.bar([x + 0.2 for x in xs], [f["itemFill"] * 100 for f in files], width=0.4, label="items used %")
        ax.set_xticks(xs, [f["name"] for f in files], rotation=30, ha="right", fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_ylabel("%")
        ax.legend(fontsize=7)

    def chains(ax: Any) -> None:
        h = idx["chainLengths"]
        if not h:
            _no_data(ax, "no index keys")
            return
        ks = sorted(int(k) for k in h)
        ax.bar(ks, [h[str(k)] for k in ks], width=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("chain length (items walked from the slot)")
        ax.set_ylabel("slots")

    def queues(ax: Any) -> None:
        rows = sorted(r["queues"], key=lambda q: (-q["messages"], q["topic"], q["queueId"]))[:30]
        if not rows:
            _no_data(ax, "no queues")
            return
        _bars(ax, [f"{q['topic']}/{q['queueId']}" for q in rows], [q["messages"] for q in rows], horizontal=True)
        behind = [q["dispatchBehind"] or 0 for q in rows]
        if any(behind):
            ax.barh(range(len(rows)), behind, color=_RED, label="not dispatched to the ConsumeQueue")
            ax.legend(fontsize=7)
        ax.set_xlabel("messages in the CommitLog")

    def consumers(ax: Any) -> None:
        g = [x for x in r["consumers"]["groups"] if x["lag"] is not None][:40]
        if not g:
            _no_data(ax, "no consumer offsets (config/consumerOffset.json)" if not r["consumers"]["file"]
                     else "no consumer offsets for the queues of this store")
            return
        colors = [_RED if x["lag"] > 0 else _GREEN for x in g]
        ax.barh(range(len(g)), [x["lag"] for x in g], color=colors)
        ax.set_yticks(range(len(g)), [f"{x['group']} {x['topic']}/{x['queueId']}" for x in g], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("lag (messages: ConsumeQueue max offset − committed offset)")

    def checkpoint(ax: Any) -> None:
        c = r["checkpoint"]
        pairs = [("CommitLog", c["physicMsgTimestamp"], c["lastCommitLogTimestamp"]),
                 ("ConsumeQueue", c["logicsMsgTimestamp"], c["lastConsumeQueueTimestamp"]),
                 ("IndexFile", c["indexMsgTimestamp"], c["lastIndexTimestamp"])]
        pts = [(n, a, b) for n, a, b in pairs if a > 0 or b > 0]
        if not pts:
            _no_data(ax, "empty store")
            return
        for i, (_n, a, b) in enumerate(pts):
            if a > 0:
                ax.plot([_dt.datetime.fromtimestamp(a / 1000, tz=_dt.UTC)], [i], "o", color="C0",
                        label="checkpoint" if i == 0 else None)
            if b > 0:
                ax.plot([_dt.datetime.fromtimestamp(b / 1000, tz=_dt.UTC)], [i], "s", color="C1",
                        label="last entry of the files" if i == 0 else None)
        ax.set_yticks(range(len(pts)), [p[0] for p in pts])
        ax.set_ylim(-0.5, len(pts) - 0.5)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.legend(fontsize=7)

    def segments(ax: Any) -> None:
        segs = [s for s in r["commitLog"]["segments"] if s["minStoreTimestamp"] is not None]
        if not segs:
            _no_data(ax, "no messages")
            return
        import matplotlib.dates as mdates

        for i, s in enumerate(segs):
            a = mdates.date2num(_dt.datetime.fromtimestamp(s["minStoreTimestamp"] / 1000, tz=_dt.UTC))
            b = mdates.date2num(_dt.datetime.fromtimestamp(s["maxStoreTimestamp"] / 1000, tz=_dt.UTC))
            color = _RED if s["timeBackwards"] else "C0"
            ax.broken_barh([(a, max(b - a, 1e-6))], (i - 0.4, 0.8), color=color)
        ax.set_yticks(range(len(segs)), [s["name"] for s in segs], fontsize=7)
        ax.xaxis_date()
        ax.axvline(mdates.date2num(_dt.datetime.fromtimestamp(r["retention"]["oldestStoreTimestamp"] / 1000,
                                                              tz=_dt.UTC)), color="k", ls="--", lw=0.8,
                   label="retention horizon (oldest message)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.legend(fontsize=7)
        ax.set_title("red: store time goes backwards inside the segment", fontsize=8)

    bs = r["bodySize"]
    kpm = r["keysPerMessage"]

    def keys(ax: Any) -> None:
        if not kpm:
            _no_data(ax, "no messages")
            return
        ks = sorted(int(k) for k in kpm)
        _bars(ax, [str(k) for k in ks], [kpm[str(k)] for k in ks])
        ax.set_xlabel("index keys per message (unique key + KEYS)")
        ax.set_ylabel("messages")

    return [
        ("index_fill", "IndexFile slot and item fill", index_fill),
        ("chain_lengths", "Hash chain lengths (all IndexFiles)", chains),
        ("traffic_topics_messages", "Messages per topic over store time",
         lambda ax: _stacked(ax, traffic, traffic["topics"].get("messages", {}), "messages")),
        ("traffic_topics_bytes", "Bytes per topic over store time",
         lambda ax: _stacked(ax, traffic, traffic["topics"].get("bytes", {}), "bytes")),
        ("traffic_queues_messages", "Messages per queue over store time",
         lambda ax: _stacked(ax, traffic, traffic["queues"].get("messages", {}), "messages")),
        ("body_size", "Body size distribution", lambda ax: _log2_hist(ax, bs["edges"], bs["counts"], "body bytes")),
        ("keys_per_message", "Index keys per message", keys),
        ("queues", "Messages per queue and ConsumeQueue lag to the CommitLog", queues),
        ("consumer_lag", "Consumer groups' lag per queue", consumers),
        ("checkpoint", "Checkpoint times against the files' last entries", checkpoint),
        ("segments", "CommitLog segment timeline", segments),
    ]


# ----------------------------------------------------------------------------- Kafka plots
def kafka_plots(r: dict[str, Any]) -> list[PlotSpec]:
    parts = r["partitions"]
    segs = [(p["partition"], s) for p in parts for s in p["segments"]]

    def timeline(ax: Any) -> None:
        rows = [(pn, s) for pn, s in segs if s["minTimestamp"] is not None and s["minTimestamp"] >= 0]
        if not rows:
            _no_data(ax, "no batches")
            return
        import matplotlib.dates as mdates

        rows = rows[-40:]  # one row per segment: the newest 40
        pnames = [p["partition"] for p in parts]
        for y, (pn, s) in enumerate(rows):
            a = mdates.date2num(_dt.datetime.fromtimestamp(s["minTimestamp"] / 1000, tz=_dt.UTC))
            b = mdates.date2num(_dt.datetime.fromtimestamp(s["maxTimestamp"] / 1000, tz=_dt.UTC))
            ax.broken_barh([(a, max(b - a, 1e-6))], (y - 0.4, 0.8), color=f"C{pnames.index(pn) % 10}", alpha=0.85)
        ax.set_yticks(range(len(rows)), [f"{pn}/{s['baseOffset']}" for pn, s in rows], fontsize=6)
        ax.invert_yaxis()
        ax.xaxis_date()
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.set_xlabel("record timestamps (min to max) of each segment")

    def offsets(ax: Any) -> None:
        rows = [(pn, s) for pn, s in segs if s["lastOffset"] is not None]
        if not rows:
            _no_data(ax, "no batches")
            return
        names = [p["partition"] for p in parts]
        for k, (pn, s) in enumerate(rows):
            y = names.index(pn)
            ax.broken_barh([(s["baseOffset"], max(s["lastOffset"] + 1 - s["baseOffset"], 1))], (y - 0.4, 0.8),
                           color=f"C{k % 10}", alpha=0.8)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("offset")

    def density(ax: Any) -> None:
        if not segs:
            _no_data(ax, "no segments")
            return
        _bars(ax, [f"{pn}/{s['baseOffset']}" for pn, s in segs], [s["indexEntriesPerMiB"] for pn, s in segs])
        exp = r["indexIntervalBytes"]
        if exp > 0:
            ax.axhline((1 << 20) / exp, color=_RED, ls="--", label=f"1 MiB / index.interval.bytes ({exp})")
            ax.legend(fontsize=7)
        ax.set_ylabel(".index entries per MiB of log")

    def breaks(ax: Any) -> None:
        names = [p["partition"] for p in parts]
        xs = list(range(len(names)))
        ax.bar([x - 0.2 for x in xs], [p["timestampBreaks"] for p in parts], width=0.4,
               label="batches older than an earlier batch")
        ax.bar([x + 0.2 for x in xs], [sum(s["timeIndexBreaks"] for s in p["segments"]) for p in parts], width=0.4,
               label=".timeindex entries not increasing", color=_RED)
        ax.set_xticks(xs, names, fontsize=7)
        ax.legend(fontsize=7)

    def rate(ax: Any) -> None:
        rp = r["recordsPerSecond"]
        if not rp["bins"]:
            _no_data(ax, "no timestamps")
            return
        xs = [_dt.datetime.fromtimestamp((rp["start"] + i * rp["binMs"]) / 1000, tz=_dt.UTC) for i in range(rp["bins"])]
        for name, ys in list(rp["partitions"].items())[:20]:
            if len(xs) == 1:
                ax.bar(xs, ys, width=rp["binMs"] / 86_400_000, label=name)
            else:
                ax.plot(xs, ys, label=name)
        ax.set_ylabel(f"records/s (bins of {rp['binMs'] // 1000} s, by batch max timestamp)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.legend(fontsize=7)

    def producers(ax: Any) -> None:
        top = r["producers"]["top"]
        if not top:
            _no_data(ax, "no producer ids (idempotence off)")
            return
        labels = [str(p["producerId"]) for p in top]
        ax.barh(range(len(top)), [p["batches"] for p in top], label="batches")
        ax.barh(range(len(top)), [p["transactionalBatches"] for p in top], label="transactional", color="C1")
        ax.set_yticks(range(len(top)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"batches  (markers: {r['producers']['commits']} COMMIT, {r['producers']['aborts']} ABORT)")
        ax.legend(fontsize=7)

    def recovery(ax: Any) -> None:
        names = [p["partition"] for p in parts]
        xs = list(range(len(names)))
        ax.bar([x - 0.2 for x in xs], [p["logEndOffset"] for p in parts], width=0.4, label="log end offset")
        ax.bar([x + 0.2 for x in xs], [p["recoveryPoint"] if p["recoveryPoint"] is not None else 0 for p in parts],
               width=0.4, label="recovery point (0: no checkpoint)", color="C1")
        ax.set_xticks(xs, names, fontsize=7)
        ax.legend(fontsize=7)

    bs = r["batchSize"]
    cr = r["compressionRatio"]

    def ratio(ax: Any) -> None:
        if not cr["sampled"]:
            _no_data(ax, "no compressed batches")
            return
        e = cr["edges"]
        labels = [f"{e[i]:g}–{e[i + 1]:g}" for i in range(len(e) - 1)] + [f"≥{e[-1]:g}"]
        _bars(ax, labels, cr["counts"])
        ax.set_xlabel(f"uncompressed / stored bytes ({cr['sampled']} batches sampled)")

    return [
        ("segment_timeline", "Segment timeline (timestamps)", timeline),
        ("segment_offsets", "Segment timeline (offsets)", offsets),
        ("index_density", "Offset index density", density),
        ("time_breaks", "Time monotonicity breaks", breaks),
        ("batch_size", "Batch size distribution", lambda ax: _log2_hist(ax, bs["edges"], bs["counts"], "batch bytes")),
        ("compression_ratio", "Compression ratio distribution", ratio),
        ("records_per_second", "Records per second over time", rate),
        ("producers", "Producer ids and transactions", producers),
        ("recovery_point", "Recovery point vs log end", recovery),
    ]


# ----------------------------------------------------------------------------- output
def _draw(spec: PlotSpec) -> Figure:
    fig = _figure_class()(figsize=(7.5, 3.6))
    # fixed margins (tight_layout would measure every label: half of the drawing time)
    fig.subplots_adjust(left=0.2, right=0.98, top=0.93, bottom=0.24)
    ax = fig.add_subplot()
    spec[2](ax)
    return fig


def plots_for(report: dict[str, Any]) -> list[PlotSpec]:
    return rocketmq_plots(report) if report["layout"] == "rocketmq" else kafka_plots(report)


def write_pngs(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Every plot as ``OUT_DIR/NAME.png``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in plots_for(report):
        fig = _draw(spec)
        p = out_dir / f"{spec[0]}.png"
        fig.savefig(p, format="png", dpi=110)
        paths.append(p)
    return paths


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>", "", text, count=1, flags=re.S)  # the date and RDF block


def _table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verify_html(v: dict[str, Any]) -> str:
    status = "clean" if v["ok"] else f"{v['problems']} problem(s)"
    cells = []
    for f in v["files"]:
        color = _GREEN if f["ok"] else _RED
        tip = html.escape("\n".join(f["problems"][:10]) or "ok")
        cells.append(f'<span class="file" style="background:{color}" title="{tip}">{html.escape(f["file"])}</span>')
    problems = [p for f in v["files"] for p in f["problems"]] + v.get("otherProblems", [])
    plist = "".join(f"<li>{html.escape(p)}</li>" for p in problems[:50])
    return (f'<section id="verify"><h2>Verify: <span style="color:{_GREEN if v["ok"] else _RED}">{status}</span></h2>'
            f'<div class="files">{"".join(cells)}</div>' + (f"<ul>{plist}</ul>" if plist else "") + "</section>")


def _tables(r: dict[str, Any]) -> dict[str, str]:
    if r["layout"] == "rocketmq":
        idx = r["index"]
        return {
            "index_fill": _table(["file", "slots used", "slot fill", "items", "item fill", "max chain", "collision rate"],
                                 [[f["name"], f["slotsUsed"], f["slotFill"], f["items"], f["itemFill"], f["maxChain"],
                                   f["collisionRate"]] for f in idx["files"]]),
            "chain_lengths": _table(["file", "slot", "length", "distinct hashes", "key hashes (items)"],
                                    [[c["file"], c["slot"], c["length"], c["distinctHashes"],
                                      ", ".join(f"{h['hash']} ({h['items']})" for h in c["hashes"])]
                                     for c in idx["longestChains"]]),
            "queues": _table(["topic", "queue", "messages", "bytes", "CommitLog next offset", "ConsumeQueue max offset",
                              "not dispatched"],
                             [[q["topic"], q["queueId"], q["messages"], q["bytes"], q["commitLogNextOffset"],
                               q["consumeQueueMaxOffset"], q["dispatchBehind"]] for q in r["queues"]]),
            "consumer_lag": _table(["group", "topic", "queue", "committed", "max offset", "lag"],
                                   [[g["group"], g["topic"], g["queueId"], g["offset"], g["maxOffset"], g["lag"]]
                                    for g in r["consumers"]["groups"]]),
            "checkpoint": _table(["file kind", "checkpoint", "last entry"],
                                 [["CommitLog", _ts(r["checkpoint"]["physicMsgTimestamp"]),
                                   _ts(r["checkpoint"]["lastCommitLogTimestamp"])],
                                  ["ConsumeQueue", _ts(r["checkpoint"]["logicsMsgTimestamp"]),
                                   _ts(r["checkpoint"]["lastConsumeQueueTimestamp"])],
                                  ["IndexFile", _ts(r["checkpoint"]["indexMsgTimestamp"]),
                                   _ts(r["checkpoint"]["lastIndexTimestamp"])]]),
            "segments": _table(["segment", "messages", "bytes", "first store time", "last store time", "time backwards",
                                "eligible for deletion after"],
                               [[s["name"], s["messages"], s["bytes"], _ts(s["firstStoreTimestamp"]),
                                 _ts(s["lastStoreTimestamp"]), s["timeBackwards"], _ts(s["expiresMs"])]
                                for s in r["commitLog"]["segments"]]),
        }
    return {
        "segment_timeline": _table(["partition", "segment", "offsets", "records", "bytes", "min timestamp",
                                    "max timestamp"],
                                   [[p["partition"], s["name"], f"{s['firstOffset']}–{s['lastOffset']}", s["records"],
                                     s["bytes"], _ts(s["minTimestamp"]), _ts(s["maxTimestamp"])]
                                    for p in r["partitions"] for s in p["segments"]]),
        "producers": _table(["producer id", "epoch", "batches", "records", "transactional batches", "COMMIT", "ABORT"],
                            [[p["producerId"], p["epoch"], p["batches"], p["records"], p["transactionalBatches"],
                              p["commits"], p["aborts"]] for p in r["producers"]["top"]]),
        "recovery_point": _table(["partition", "log start", "log end", "recovery point", "unflushed", "file"],
                                 [[p["partition"], p["logStartOffset"], p["logEndOffset"], p["recoveryPoint"],
                                   p["unflushedMessages"], p["recoveryPointFile"]] for p in r["partitions"]]),
    }


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;margin:18px 0 6px}
.sub{color:#59636e;margin-bottom:12px}
.files{display:flex;flex-wrap:wrap;gap:4px}
.file{color:#fff;border-radius:4px;padding:2px 6px;font:11px monospace}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}
figure{margin:0;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow:auto}
figure svg{width:100%;height:auto} figcaption{font-weight:600;margin-bottom:4px}
table{border-collapse:collapse;font-size:12px;margin-top:6px} td,th{border:1px solid #d0d7de;padding:2px 6px;text-align:left}
th{background:#f6f8fa}
"""


def render_figures(report: dict[str, Any]) -> list[str]:
    """The page's figures (inline SVG, plus a table where useful), one per plot: the part of
    :func:`render_html` that needs the figures only (the CLI draws them while verify runs)."""
    tables = _tables(report)
    figs = []
    for spec in plots_for(report):
        fig = _draw(spec)
        svg = _svg(fig)
        figs.append(f'<figure id="{spec[0]}" class="plot"><figcaption>{html.escape(spec[1])}</figcaption>{svg}'
                    f"{tables.get(spec[0], '')}</figure>")
    return figs


def render_html(report: dict[str, Any], verify: dict[str, Any] | None, figures: list[str] | None = None) -> str:
    """The whole page: title, verify summary, one figure (inline SVG, plus a table where useful) per
    plot (``figures``: those of :func:`render_figures` when already drawn)."""
    figs = render_figures(report) if figures is None else figures
    if report["layout"] == "rocketmq":
        c = report["commitLog"]
        title = f"RocketMQ store {report['store']}"
        sub = (f"{c['messages']} messages, {c['bytes']} bytes in {len(c['segments'])} CommitLog segments; "
               f"store time {_ts(c['firstStoreTimestamp'])} – {_ts(c['lastStoreTimestamp'])}; "
               f"hash collision rate {report['index']['collisionRate']}; "
               f"{report['dispatch']['behindBytes']} CommitLog bytes not dispatched")
    else:
        title = f"Kafka log {report['path']}"
        sub = (f"{len(report['partitions'])} partition(s), {sum(p['records'] for p in report['partitions'])} records, "
               f"{sum(p['bytes'] for p in report['partitions'])} bytes; {report['producers']['count']} producer ids, "
               f"{report['producers']['commits']} COMMIT / {report['producers']['aborts']} ABORT markers")
    data = json.dumps(report, separators=(",", ":")).replace("</", "<\\/")  # no "</script>" inside
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><div class=\"sub\">{html.escape(sub)}</div>"
            + (_verify_html(verify) if verify is not None else "")
            + f'<div class="grid">{"".join(figs)}</div>'
            + f'<script type="application/json" id="report-data">{data}</script>'
            + "</body></html>")
