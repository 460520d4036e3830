"""Crash campaign in CI: ≥ 200 SIGKILLs over both layouts and all flush policies (fork server,
see ``tools/crash_campaign.py``; ``MQSTORE_CRASH_KILLS`` sets the kills per campaign, the long run
is ``python tools/crash_campaign.py --kills 5000``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_support import env_int, load_tool

campaign = load_tool("crash_campaign")
KILLS = env_int("MQSTORE_CRASH_KILLS", 50)  # × 4 campaigns = 200 kills in CI


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """The stores live on tmpfs when there is one: SIGKILL semantics do not depend on fsync (the
    page cache survives the process), and the sync policies then cost no disk flushes."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        d = Path(tempfile.mkdtemp(prefix="mqstore-crash-", dir=shm))
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("crash-warm")
    campaign.warm_up(work)
    return work


@pytest.mark.parametrize(("layout", "policy"), [("rocketmq", "sync"), ("rocketmq", "async"),
                                                ("kafka", "every-message"), ("kafka", "periodic")])
def test_sigkill_campaign_loses_nothing_acknowledged(warm: Path, work: Path, layout: str, policy: str) -> None:
    seed = {"sync": 11, "async": 12, "every-message": 13, "periodic": 14}[policy]
    res = campaign.run_campaign(layout, policy, KILLS, seed=seed, workdir=work)
    assert res.failures == []
    assert res.kills == KILLS
    assert res.lost == 0 and res.torn_records == 0 and res.verify_problems == 0 and res.query_misses == 0
    assert res.queue_offset_misses == 0 and res.duplicate_queue_offsets == 0
    assert res.messages_acked > KILLS  # the children really wrote
    assert res.messages_verified > 0 and res.rechecks >= res.messages_verified
    # both kinds of kill happened, and the targeted ones hit several phases
    assert 0 < res.targeted_kills < res.kills
    assert len(res.phases) >= 4, res.phases


def test_campaign_detects_a_lost_message(warm: Path, tmp_path: Path) -> None:
    """The checker is not vacuous: an acknowledgement the store does not hold is reported as lost."""
    res = campaign.run_campaign("rocketmq", "sync", 1, seed=3, workdir=tmp_path)
    assert res.ok()
    acked = {10**9: campaign.Ack(offset=res.kills * 10**6, queue_offset=0, timestamp=0)}
    bad = campaign.CampaignResult("rocketmq", "sync")
    import random

    campaign._check_rocketmq(tmp_path / "rocketmq-sync", "sync", acked, set(acked), bad, random.Random(1))
    assert bad.lost == 1 and not bad.ok()


def test_campaign_detects_a_reused_queue_offset(warm: Path, tmp_path: Path) -> None:
    """The checker is not vacuous: a record that reuses a taken queue offset is reported as a
    duplicate, and the acknowledged message it hides as a miss by queue offset."""
    res = campaign.run_campaign("rocketmq", "sync", 1, seed=5, workdir=tmp_path)
    assert res.ok()
    from mqstore import MessageStore

    path = tmp_path / "rocketmq-sync"
    cfg = campaign._rocketmq_config("sync")
    cfg.background_services = False
    with MessageStore.open(path, cfg) as s:
        r = s.put("T0", campaign.body_of(0), queue_id=0, keys=["key-0", "shared"])
        s.engine.queue_offsets[("T0", 0)] = r.queue_offset  # as the old recovery did: the table restarts too low
        s.put("T0", campaign.body_of(3), queue_id=0, keys=["key-3", "shared"])
    acked = {0: campaign.Ack(offset=r.commit_log_offset, queue_offset=r.queue_offset, timestamp=r.store_timestamp)}
    bad = campaign.CampaignResult("rocketmq", "sync")
    import random

    campaign._check_rocketmq(path, "sync", acked, set(acked), bad, random.Random(1))
    assert bad.duplicate_queue_offsets == 1 and not bad.ok()
