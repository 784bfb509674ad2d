"""Processes and ports for tests: a Spark job in its own process group (to kill -9 with its JVM),
and a loopback port nobody listens on."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def start_job(script: Path, cfg: dict, log: Path) -> subprocess.Popen:
    """``python script '<cfg as JSON>'`` in its own session (so its Spark JVM dies with it), this
    checkout first on PYTHONPATH (the driver and its Python workers), output appended to *log*."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(script), json.dumps(cfg)], cwd=str(REPO),
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """kill -9 the process and its session (the job and its Spark JVM), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
