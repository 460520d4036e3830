"""The report pages in a real headless browser (the system's Chromium driven by Playwright): every
plot is drawn (a non-empty inline SVG with drawn paths and a visible size) and the page logs no
console error and loads nothing from the network."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore import MessageStore, StoreConfig
from mqstore.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _pages(tmp_path: Path) -> list[tuple[Path, int]]:
    store = tmp_path / "store"
    cfg = StoreConfig(commit_log_file_size=1 << 16, hash_slot_num=100, index_num=400, background_services=False)
    with MessageStore.open(store, cfg) as s:
        for i in range(200):
            s.put(f"T{i % 3}", b"x" * (i * 3), queue_id=i % 4, keys=[f"k{i}"], tags="A")
    out = []
    r = CliRunner().invoke(cli, ["rocketmq", "report", str(store), "--html", str(tmp_path / "rmq.html")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out.append((tmp_path / "rmq.html", 11))
    kdir = tmp_path / "kafka"
    shutil.copytree(REPO / "tests" / "fixtures" / "kafka" / "multi_segment_roll_bytes" / "segments", kdir / "topic-0")
    r = CliRunner().invoke(cli, ["kafka", "report", str(kdir), "--html", str(tmp_path / "kafka.html")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out.append((tmp_path / "kafka.html", 9))
    return out


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (scripts/setup.sh installs it with "
                                              "apt-get: `apt-get install -y chromium`)")
def test_report_pages_draw_every_plot_in_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    pages = _pages(tmp_path)
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                    args=FLAGS[1:], viewport={"width": 1400, "height": 1000})
        try:
            for path, expected in pages:
                page = ctx.new_page()
                errors: list[str] = []
                requests: list[str] = []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("request", lambda rq, requests=requests: requests.append(rq.url))
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                plots = page.evaluate("""() => [...document.querySelectorAll('figure.plot')].map(f => {
                    const svg = f.querySelector('svg');
                    if (!svg) return {id: f.id, ok: false};
                    const r = svg.getBoundingClientRect();
                    return {id: f.id, w: r.width, h: r.height, paths: svg.querySelectorAll('path, use').length,
                            texts: svg.querySelectorAll('text').length};
                })""")
                assert len(plots) == expected, plots
                for p in plots:  # drawn: a visible size, the axes (paths) and text (a figure without data says so)
                    assert p["w"] > 300 and p["h"] > 100 and p["paths"] >= 5 and p["texts"] >= 1, p
                assert errors == []
                assert requests == [path.as_uri()]  # the page itself, nothing else
                verify = page.evaluate("() => document.querySelectorAll('#verify .file').length")
                assert verify > 0
                page.close()
        finally:
            ctx.close()
