"""Driver-side progress of the rebuild jobs, fed from Spark's status tracker.

Each phase of a job runs its Spark jobs under its own job group; a daemon thread polls the status
tracker for the tasks of that group's stages and reports ``(phase, done_tasks, total_tasks)``.
This works the same in local mode and on a cluster (the tracker lives in the driver).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: ``progress(phase, done, total)``: tasks of the phase's stages done so far, out of ``total``.
ProgressFn = Callable[[str, int, int], None]

POLL_SECONDS = 0.25


def _group_tasks(tracker: Any, group: str) -> tuple[int, int]:
    done = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            total += stage.numTasks
            done += stage.numCompletedTasks
    return done, total


@contextmanager
def phase(spark_context: Any, label: str, progress: ProgressFn | None,
          timings: dict[str, float] | None = None) -> Iterator[None]:
    """Run the Spark jobs of the ``with`` body as one phase of the progress display (its wall
    time is added to ``timings[label]``)."""
    import time

    t0 = time.perf_counter()
    group = f"mqstore-{uuid.uuid4().hex[:12]}"
    spark_context.setJobGroup(group, label)
    stop = threading.Event()
    thread = None
    if progress is not None:
        progress(label, 0, 0)
        tracker = spark_context.statusTracker()

        def poll() -> None:
            while not stop.wait(POLL_SECONDS):
                try:
                    done, total = _group_tasks(tracker, group)
                except Exception:
                    return
                if total:
                    progress(label, min(done, total), total)

        thread = threading.Thread(target=poll, name=f"progress-{group}", daemon=True)
        thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        if timings is not None:
            timings[label] = round(timings.get(label, 0.0) + time.perf_counter() - t0, 3)
        if thread is not None:
            thread.join(timeout=2)
        spark_context.setLocalProperty("spark.jobGroup.id", None)
        spark_context.setLocalProperty("spark.job.description", None)
        if progress is not None and ok:
            try:
                _, total = _group_tasks(spark_context.statusTracker(), group)
            except Exception:
                total = 1
            progress(label, max(total, 1), max(total, 1))
