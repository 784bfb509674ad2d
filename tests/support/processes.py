"""Processes and ports for tests: a Spark job in its own process group (to kill -9 with its JVM),
and a loopback port nobody listens on."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: A driver running ``readStream.format("binlog-cdc")`` -> ``foreachBatch(DeltaUpserter)`` with
#: availableNow (config JSON: ``root``, ``app_id``, ``server``, ``options``, ``checkpoint``;
#: optional ``hang_after``/``marker_dir``: after that batch reached Delta, mark it and hang, for
#: a kill -9 between the Delta commit and Spark's; optional ``written``: processingTime until that
#: file exists (:func:`run_until_written`), not availableNow; optional ``out``: each batch's
#: changes that are not snapshot rows, ``[[op, before, after], ...]``, into
#: ``<out>/<batch id>.json``, rewritten when Spark replays the batch). Prints ``batch N`` per
#: batch, ``done``.
DELTA_JOB = textwrap.dedent("""
    import json, os, sys, time
    from streaming.apps.local_spark import local_spark
    from streaming.sinks.delta.upserter import DeltaUpserter

    cfg = json.loads(sys.argv[1])
    spark = local_spark("delta-kill-test")
    up = DeltaUpserter(cfg["root"], app_id=cfg["app_id"], **cfg["server"])

    def fb(df, batch_id):
        if cfg.get("out"):
            t = df.toArrow()
            changes = [r for r in zip(*(t.column(c).to_pylist() for c in ("op", "before",
                                                                           "after"))) if r[0] != "r"]
            path = os.path.join(cfg["out"], f"{batch_id}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(changes, f)
            os.replace(path + ".tmp", path)
        result = up(df, batch_id)
        time.sleep(cfg.get("batch_pause", 0))    # a batch takes at least this long
        print("batch", batch_id, flush=True)
        hang = cfg.get("hang_after")
        if hang is not None and batch_id >= hang:
            # committed to Delta, not yet to Spark's commit log: the test kills us here
            open(os.path.join(cfg["marker_dir"], str(batch_id)), "w").close()
            time.sleep(600)

    reader = spark.readStream.format("binlog-cdc")
    for k, v in cfg["options"].items():
        reader = reader.option(k, v)
    w = reader.load().writeStream.foreachBatch(fb).option("checkpointLocation", cfg["checkpoint"])
    if cfg.get("written"):
        from tests.support.processes import run_until_written
        run_until_written(w, cfg["written"])
    else:
        q = w.trigger(availableNow=True).start()
        q.awaitTermination()
        if q.exception() is not None:
            print("FAILED", q.exception(), flush=True)
            sys.exit(3)
    print("done", flush=True)
    spark.stop()
""")



def run_until_written(writer, written: str | None) -> None:
    """Start *writer* (a ``writeStream``) with processingTime and process what is available until
    the file *written* exists (the test's rows are in), then once more, and stop; the query's
    failure prints ``FAILED`` and exits 3. Before PySpark 4.2 availableNow runs one batch (the
    source's limits never apply), so a test that needs several batches runs this."""
    q = writer.trigger(processingTime="0 seconds").start()
    try:
        while True:
            done = not written or os.path.exists(written)
            q.processAllAvailable()
            if done:
                break
            time.sleep(0.5)
    except Exception as e:  # noqa: BLE001 - the query's failure, printed for the test
        print("FAILED", e, flush=True)
        sys.exit(3)
    q.stop()


def delta_job(server, tmp_path: Path, app_id: str, options: dict, **extra) -> tuple:
    """``(script, cfg, log)`` of a :data:`DELTA_JOB` reading *options* from *server* into Delta
    tables under ``tmp_path/"delta"`` (checkpoint ``tmp_path/"chk"``); *extra* adds to the
    config (``marker_dir``, ``out``...)."""
    p = server.cdc_params()
    cfg = {"root": str(tmp_path / "delta"), "app_id": app_id,
           "checkpoint": str(tmp_path / "chk"), "options": options,
           "server": {"host": p["host"], "port": p["port"], "user": p["user"],
                      "password": p["password"]}, **extra}
    script = tmp_path / "job.py"
    script.write_text(DELTA_JOB)
    return script, cfg, tmp_path / "job.log"


def start_job(script: Path, cfg: dict, log: Path) -> subprocess.Popen:
    """``python script '<cfg as JSON>'`` in its own session (so its Spark JVM dies with it), this
    checkout first on PYTHONPATH (the driver and its Python workers), output appended to *log*."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(script), json.dumps(cfg)], cwd=str(REPO),
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


#: a log line that names a failure: a traceback's start, an exception or error class, the job's
#: own FAILED line, a Spark/JVM ERROR record
_FAILURE_LINE = re.compile(r"Traceback \(most recent call last\)|^\S*(Error|Exception)\b|"
                           r"\b[A-Z]\w*(Error|Exception):|^FAILED\b|\bERROR\b")


def log_summary(text: str, *, lines: int = 40, width: int = 400, tail: int = 2000) -> str:
    """A job log made readable in a test failure: the first *lines* lines naming a failure
    (each cut to *width* characters: offsets are long JSON lines), then the log's last *tail*
    characters."""
    found = [ln if len(ln) <= width else ln[:width] + f"... [{len(ln)} chars]"
             for ln in text.splitlines() if _FAILURE_LINE.search(ln)]
    head = "\n".join(found[:lines]) if found else "(no line names an error)"
    more = f"\n... and {len(found) - lines} more" if len(found) > lines else ""
    return (f"--- lines naming errors ---\n{head}{more}\n"
            f"--- last {tail} characters of the log ---\n{text[-tail:]}")


def wait_for(log: Path, proc: subprocess.Popen, what, timeout: float = 300) -> str:
    """Wait until *what(log text)* holds and return the text, failing the test with the log's
    summary if the job ends first or *timeout* s pass."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text() if log.exists() else ""
        if what(text):
            return text
        assert proc.poll() is None, (f"the job exited ({proc.returncode}):\n"
                                     + log_summary(log.read_text()))
        assert time.monotonic() < deadline, (f"not within {timeout:.0f} s:\n"
                                             + log_summary(log.read_text()))
        time.sleep(0.2)


def run_to_end(script: Path, cfg: dict, log: Path, timeout: float = 600) -> str:
    """Start the job and wait for it to end by itself (killed -9 after *timeout* s, failing the
    test); asserts it exited 0 and returns its whole log."""
    import pytest
    proc = start_job(script, cfg, log)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"the job did not end within {timeout:.0f} s:\n"
                    + log_summary(log.read_text()))
    out = log.read_text()
    assert proc.returncode == 0, f"the job exited {proc.returncode}:\n" + log_summary(out)
    return out


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
