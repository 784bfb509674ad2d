"""The source on a Spark standalone cluster, not only in local mode (issue 17, item 6).

A master and a worker (``spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``
from pyspark's ``bin/``) on 127.0.0.1; a driver process streams the changes of a table into a
parquet directory (file sink + checkpoint: exactly once) while the test writes to MariaDB; the
worker (and so its executor and Python workers) is killed with SIGKILL mid-stream and started
again. At the end the rows written equal a SELECT of the table: no change lost, none twice.

The executors get the worktree through ``spark.executorEnv.PYTHONPATH`` and the row decoder
through the source option ``rowDecoder`` (the driver's ``BINLOG_CDC_DECODER`` does not reach
them). Skipped when spark-class cannot start a master or a worker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"

DRIVER = r'''
import json, os, sys, time
cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg["root"])
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(cfg["master"]).appName("binlog-cdc-cluster-test")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "512m").config("spark.executor.memory", "512m")
         .config("spark.executor.cores", "1").config("spark.cores.max", "1")
         .config("spark.executorEnv.PYTHONPATH", cfg["root"])
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.task.maxFailures", "8")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
reader = spark.readStream.format("binlog-cdc")
for k, v in cfg["options"].items():
    reader = reader.option(k, v)
q = (reader.load().writeStream.format("parquet").option("path", cfg["out"])
     .option("checkpointLocation", cfg["checkpoint"]).trigger(processingTime="500 milliseconds")
     .start())
print("started", flush=True)
while not os.path.exists(cfg["stop"]):
    if q.exception() is not None:
        print("FAILED", q.exception(), flush=True)
        sys.exit(1)
    time.sleep(0.2)
q.processAllAvailable()
q.stop()
# the relative path of a batch read is resolved here, on the driver
batch = spark.read.format("binlog-cdc").option("includeTables", cfg["options"]["includeTables"]) \
    .option("rowDecoder", "python").load(cfg["relative"])
print("BATCH", batch.count(), batch.rdd.getNumPartitions(), flush=True)
spark.stop()
print("done", flush=True)
'''


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(tmp / "logs"), SPARK_WORKER_DIR=str(tmp / "work"),
               PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    env.pop("BINLOG_CDC_DECODER", None)
    return env


class Cluster:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.port = _port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.worker_starts = 0

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")
        return subprocess.Popen([str(SPARK_CLASS), *args], env=_env(self.tmp), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def _wait_log(self, name: str, text: str, proc: subprocess.Popen, timeout: float,
                  after: int = 0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            log = (self.tmp / f"{name}.log").read_text(errors="replace")
            if log.count(text) > after:
                return True
            time.sleep(0.3)
        return False

    def start_master(self) -> bool:
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host",
                                             "127.0.0.1", "--port", str(self.port),
                                             "--webui-port", str(_port())])
        return self._wait_log("master", "I have been elected leader", self.master, 90)

    def start_worker(self) -> bool:
        (self.tmp / "work").mkdir(exist_ok=True)
        before = self.worker_starts
        self.worker = self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", self.url,
                                             "--host", "127.0.0.1", "--cores", "1", "--memory",
                                             "1g", "--webui-port", str(_port()), "--work-dir",
                                             str(self.tmp / "work")])
        self.worker_starts += 1
        return self._wait_log("worker", "Successfully registered with master", self.worker, 90,
                              after=before)

    def kill_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)     # the executor and its Python workers
            self.worker.wait(30)

    def stop(self) -> None:
        for p in (self.worker, self.master):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)


@pytest.fixture
def cluster(tmp_path):
    if not SPARK_CLASS.exists():
        pytest.skip(f"no {SPARK_CLASS}")
    c = Cluster(tmp_path)
    try:
        if not c.start_master():
            pytest.skip("spark-class could not start a standalone master: "
                        + (tmp_path / "master.log").read_text(errors="replace")[-500:])
        if not c.start_worker():
            pytest.skip("spark-class could not start a standalone worker: "
                        + (tmp_path / "worker.log").read_text(errors="replace")[-500:])
        yield c
    finally:
        c.stop()


def _rows_written(out: Path) -> list[dict]:
    import pyarrow.parquet as pq
    rows = []
    meta = out / "_spark_metadata"
    if not meta.exists():
        return rows
    committed = set()
    for f in meta.iterdir():
        if not f.name.split(".")[0].isdigit() or f.name.endswith(".crc") or f.name.startswith("."):
            continue
        for line in f.read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("action") == "add":
                committed.add(Path(entry["path"].replace("file:", "", 1)).name)
    for f in out.glob("part-*.parquet"):
        if f.name in committed:
            rows += pq.read_table(f).to_pylist()
    return rows


def test_stream_on_a_standalone_cluster_survives_a_killed_worker_exactly_once(
        cluster, mariadb, db, tmp_path, binlog_snapshot):
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    # an archived copy under a relative path for the batch read (resolved on the driver)
    cwd = tmp_path / "driver-cwd"
    (cwd / "binlogs").mkdir(parents=True)
    out, ckpt, stop = tmp_path / "out", tmp_path / "ckpt", tmp_path / "stop"
    cfg = {"master": cluster.url, "root": str(ROOT), "cwd": str(cwd), "out": str(out),
           "checkpoint": str(ckpt), "stop": str(stop), "relative": "binlogs/",
           "options": source_options(mariadb, db, start, rowDecoder="python",
                                     maxEventsPerTrigger=200)}
    log = open(tmp_path / "driver.log", "wb")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable,
               SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    # the driver runs in *cwd*: "binlogs/" is relative to it (and to the driver JVM's Python
    # workers that plan the read), not to the executors' working directories
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(cfg)], env=env, cwd=cwd,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 420
    try:
        n = 0

        def write(k: int) -> None:
            nonlocal n
            with conn.cursor() as cur:
                for _ in range(k):
                    cur.execute("INSERT INTO t VALUES (%s, %s)", (n, n))
                    if n % 3 == 0:
                        cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (n // 2,))
                    n += 1

        write(300)
        # wait for a few committed batches, then kill the worker mid-stream
        while len(_rows_written(out)) < 200:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no rows on the cluster in time"
            time.sleep(0.5)
        write(300)
        cluster.kill_worker()
        write(300)
        time.sleep(3)
        assert cluster.start_worker(), "the worker did not start again"
        write(300)
        with conn.cursor() as cur:
            cur.execute("DELETE FROM t WHERE id % 10 = 0")
        want = {r[0]: r[1] for r in mariadb.execute(f"SELECT id, v FROM `{db}`.t")}
        for f in binlog_snapshot(since_file=start[0]):
            (cwd / "binlogs" / f.name).write_bytes(f.read_bytes())
        stop.touch()
        assert driver.wait(max(10, deadline - time.monotonic())) == 0, \
            (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
        conn.close()

    rows = _rows_written(out)
    seqs = [r["seq"] for r in rows]
    assert len(seqs) == len(set(seqs)), "a change was written twice"
    state: dict = {}
    for r in sorted(rows, key=lambda r: r["seq"]):
        if r["op"] == "d":
            del state[json.loads(r["before"])["id"]]
        else:
            after = json.loads(r["after"])
            state[after["id"]] = after["v"]
    assert state == want
    assert cluster.worker_starts == 2
    text = (tmp_path / "driver.log").read_text(errors="replace")
    batch = [line.split() for line in text.splitlines() if line.startswith("BATCH")]
    assert batch and int(batch[0][1]) == len(rows), text[-2000:]
