"""A real Spark standalone cluster on 127.0.0.1 for the tests: one master and N workers started
from the installed pyspark (``bin/spark-class``), each in its own process group so that exactly
these processes (and the executors they fork) are stopped at the end."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
LOG4J = Path(__file__).resolve().parents[2] / "src" / "mqstore" / "spark" / "log4j2.properties"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user who has not activated the virtual environment: no
    ``VIRTUAL_ENV``, no venv ``bin`` on ``PATH``, no ``PYSPARK_*`` / ``PYTHONPATH`` inherited."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "PYTHON")) and k not in ("VIRTUAL_ENV",)}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


@dataclass
class StandaloneCluster:
    workdir: Path
    workers: int = 1
    cores: int = 1
    master_url: str = ""
    webui: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "wb")
        env = clean_env(SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(self.workdir),
                        SPARK_DAEMON_JAVA_OPTS=f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
                                               f"-Dlog4j2.configurationFile=file:{LOG4J}")
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                                start_new_session=True)  # its own process group: stopped as a whole
        self.procs.append(proc)
        log.close()
        return proc

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        port, self.webui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                    "--webui-port", str(self.webui))
        for i in range(self.workers):
            work = self.workdir / f"worker-{i}"
            work.mkdir(parents=True, exist_ok=True)
            self._start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                        "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(self.cores),
                        "--memory", "1g", "--work-dir", str(work))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            if self.alive_workers() >= self.workers:
                return self
            time.sleep(0.5)
        logs = "\n".join((self.workdir / f).read_text(errors="replace")[-2000:]
                         for f in ("master.log", *(f"worker-{i}.log" for i in range(self.workers))))
        self.stop()
        raise RuntimeError(f"the standalone cluster did not come up (workers alive: {self.alive_workers()}):\n{logs}")

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui}/json/", timeout=2) as r:
                state = json.loads(r.read())
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        """Stop the processes this object started (workers first), each with its process group."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        self.procs.clear()


def spark_submit(cluster: StandaloneCluster, script: str | Path, *args: str, cwd: Path, python: str | None = None,
                 conf: dict[str, str] | None = None, extra: list[str] | None = None,
                 env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master <cluster> script args`` in client mode, from ``cwd``, in an
    environment without the virtual environment activated; ``python`` (default: this
    interpreter) is given as ``spark.pyspark.python``, as docs/spark.md says."""
    settings = {"spark.pyspark.python": python or sys.executable, "spark.ui.enabled": "false",
                "spark.executor.memory": "512m", "spark.driver.memory": "512m",
                "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
                "spark.sql.shuffle.partitions": "2", **(conf or {})}
    cmd = [str(SPARK_SUBMIT), "--master", cluster.master_url,
           "--driver-java-options", f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{LOG4J}"]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [*(extra or []), str(script), *args]
    return subprocess.run(cmd, cwd=cwd, env=clean_env(**(env or {})), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
