"""The job runner (``python3 -m streaming.job``) as its users meet it: a process that prints one
line per micro-batch, stops gracefully on SIGINT/SIGTERM, and turns every mistake into one line
on stderr with exit status 2."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from support.job_toml import write_job_toml

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

pytestmark = [pytest.mark.server, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
BATCH = re.compile(r"^batch (\d+): (\d+) rows ")


def _insert(mariadb, db, ids, one_transaction=False):
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            if one_transaction:
                cur.execute("BEGIN")
            for i in ids:
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"v{i}"))
            if one_transaction:
                cur.execute("COMMIT")
    finally:
        conn.close()


def _config(tmp_path, mariadb, db, start, source_extra="", spark_extra="", trigger="1 second",
            password_env="TEST_APPS_PASSWORD", metrics=True, port=None) -> Path:
    return write_job_toml(
        tmp_path / "job.toml", mariadb, f"{db}.*", start, password_env=password_env,
        delta=tmp_path / "delta", app_id="apps-test", checkpoint=tmp_path / "chk",
        trigger=trigger, port=port, source_extra="maxEventsPerTrigger = 5\n" + source_extra,
        stream_extra='query_name = "apps_test"\n' + ("\n[metrics]\nport = 0\n" if metrics else "")
        + textwrap.dedent("""
            [spark]
            master = "local[2]"
            "spark.sql.shuffle.partitions" = "1"
            """) + spark_extra)


def _noise(err: str) -> list[str]:
    """Lines of stderr that must not be there: tracebacks, ERROR logs (Spark's, py4j's), Java
    exceptions. (Spark's start-up WARN lines and its 'Setting Spark log level to "ERROR".' may.)"""
    return [l for l in err.splitlines()
            if "Traceback" in l or "Exception" in l or l.startswith(("\tat ", "  File "))
            or (re.search(r"\bERROR\b", l) and 'log level to "ERROR"' not in l)]


class Job:
    """``python3 -m streaming.job <config>`` in its own process group (as a shell runs a
    foreground command: Ctrl-C reaches the whole group), stdout read line by line."""

    def __init__(self, config: Path, env: dict):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.job", str(config)], cwd=ROOT, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env})
        self.lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self._q), daemon=True).start()
        threading.Thread(target=lambda: self._err.extend(self.proc.stderr), daemon=True).start()

    @staticmethod
    def _read(stream, q):
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    def wait_for(self, predicate, timeout: float = 150) -> str:
        """The first new stdout line for which *predicate* holds (earlier ones are kept)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if predicate(line):
                return line
        self.kill()
        pytest.fail(f"no such line within {timeout} s; stdout: {self.lines}; stderr: "
                    f"{''.join(self._err)[-3000:]}")

    def batches(self) -> list[tuple[int, int]]:
        return [(int(m[1]), int(m[2])) for m in map(BATCH.match, self.lines) if m]

    def finish(self, timeout: float = 90) -> tuple[int, list[str], str]:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        while True:
            try:
                line = self._q.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        time.sleep(0.2)
        return rc, self.lines, "".join(self._err)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.parametrize("how", ["SIGTERM to the process", "Ctrl-C: SIGINT to its group"])
def test_the_job_stops_gracefully_and_prints_each_batch_once(mariadb, db, tmp_path, how):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = mariadb.current_position()
    _insert(mariadb, db, range(12))                       # 12 transactions: batches of 5, 5, 2
    cfg = _config(tmp_path, mariadb, db, start,
                  # idle progress events (they carry the next batch's id) twice a second
                  spark_extra='"spark.sql.streaming.noDataProgressEventInterval" = "500"\n')
    job = Job(cfg, {"TEST_APPS_PASSWORD": mariadb.cdc_params()["password"]})
    try:
        url = job.wait_for(lambda l: l.startswith("Prometheus metrics on ")).split()[-1]
        job.wait_for(lambda l: sum(r for _, r in job.batches()) >= 12)
        time.sleep(2.5)                                   # idle: several idle progress events
        _insert(mariadb, db, range(100, 104), one_transaction=True)
        job.wait_for(lambda l: sum(r for _, r in job.batches()) >= 16)
        end = mariadb.current_position()
        deadline = time.monotonic() + 20          # the listener bus is asynchronous
        while True:
            metrics = urllib.request.urlopen(url, timeout=10).read().decode()
            rows = re.search(r'^binlog_cdc_rows_total\{query="apps_test",.*\} (\S+)$', metrics,
                             re.M)
            if (rows and float(rows[1]) == 16) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert rows and float(rows[1]) == 16, metrics
        if how.startswith("SIGTERM"):
            job.proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(job.proc.pid, signal.SIGINT)
        rc, lines, err = job.finish()
    finally:
        job.kill()
    assert rc == 0, (lines, err[-3000:])
    batches = job.batches()
    # one line per real batch: ids 0, 1, 2, ... each once (idle events print nothing), and the
    # batch after the idle time is there (it has the id the idle events carried)
    assert [b for b, _ in batches] == list(range(len(batches))), lines
    assert sum(r for _, r in batches) == 16 and batches[-1][1] == 4, lines
    stopped = [l for l in lines if l.startswith("stopped at offset ")]
    assert len(stopped) == 1 and lines[-1] == stopped[0], lines
    assert stopped[0].startswith(f"stopped at offset {end[0]}:{end[1]} "), (stopped, end)
    assert f"{len(batches)} batches, 16 rows" in stopped[0]
    sig = "SIGTERM" if how.startswith("SIGTERM") else "SIGINT"
    assert f"binlog-cdc job: {sig}: stopping" in err
    assert not _noise(err), err[-3000:]
    # the metrics server is gone with the process, the port is free again
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_a_wrong_password_is_one_line_and_exit_2(mariadb, db, tmp_path):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    cfg = _config(tmp_path, mariadb, db, mariadb.current_position(), metrics=True)
    job = Job(cfg, {"TEST_APPS_PASSWORD": "not-the-password"})
    try:
        rc, lines, err = job.finish(timeout=150)
    finally:
        job.kill()
    assert rc == 2, (lines, err[-3000:])
    ours = [l for l in err.splitlines() if l.startswith("binlog-cdc job:")]
    assert len(ours) == 1 and err.splitlines()[-1] == ours[0], err[-3000:]
    assert "refused user 'cdc': check the password" in ours[0]
    assert not _noise(err) and "SQLSTATE" not in ours[0], err[-3000:]
    assert not any(l.startswith("stopped") for l in lines)


# --- runtime mistakes, in process (the session of the module is reused: no JVM start each) ---


@pytest.fixture
def job_main(spark, mariadb, db, tmp_path, capsys, monkeypatch):
    """``(rc, stdout, stderr)`` of ``streaming.apps.job.main([config])`` in this process."""
    from streaming.apps.job import main
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    monkeypatch.setenv("TEST_APPS_PASSWORD", mariadb.cdc_params()["password"])

    def run(**kw):
        cfg = _config(tmp_path, mariadb, db, kw.pop("start", mariadb.current_position()),
                      trigger=kw.pop("trigger", "availableNow"), metrics=False, **kw)
        capsys.readouterr()
        t = time.monotonic()
        rc = main([str(cfg)])
        out, err = capsys.readouterr()
        return rc, out, err, time.monotonic() - t

    yield run
    assert not spark.streams.active


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("binlog-cdc job: "), err
    assert "Traceback" not in err and "SQLSTATE" not in err and "STREAM_FAILED" not in err
    return lines[0][len("binlog-cdc job: "):]


def test_an_unreachable_server(job_main):
    with socket.socket() as s:                    # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, out, err, took = job_main(port=port, source_extra=textwrap.dedent("""\
        maxRetries = 1
        maxRetryTimeMs = 1000
        connectTimeoutMs = 1000
        """))
    assert rc == 2, (out, err)
    msg = _one_error_line(err)
    assert f"127.0.0.1:{port}" in msg and "ServerConnectionError" not in msg, msg
    assert took < 60


def test_a_purged_start_file(job_main):
    rc, out, err, _ = job_main(start=("mysql-bin.000000", 4))
    assert rc == 2, (out, err)
    msg = _one_error_line(err)
    assert "mysql-bin.000000" in msg and "purged" in msg and "failOnDataLoss=false" in msg, msg


def test_a_table_without_primary_key_fails_before_the_stream_starts(job_main, mariadb, db):
    """(It failed only when the table first changed, and again at every restart.)"""
    mariadb.execute(f"CREATE TABLE {db}.nopk (id INT, v INT)")
    rc, out, err, _ = job_main()
    assert rc == 2, (out, err)
    msg = _one_error_line(err)
    assert msg == (f"{db}.nopk has no primary key, which a sink that upserts needs to match "
                   f"changes to rows: add one (ALTER TABLE ... ADD PRIMARY KEY), or leave the "
                   f"table out with excludeTables"), msg
    assert "streaming" not in out, out


@pytest.fixture
def job_check(mariadb, db, tmp_path, capsys, monkeypatch):
    """``python3 -m streaming.job --check`` of a config streaming *db* (table ``t``), in this
    process: ``() -> (exit status, stdout lines)``."""
    from streaming.apps.job import main
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    monkeypatch.setenv("TEST_APPS_PASSWORD", mariadb.cdc_params()["password"])
    cfg = _config(tmp_path, mariadb, db, mariadb.current_position(), trigger="availableNow",
                  metrics=False)

    def run():
        capsys.readouterr()
        rc = main(["--check", str(cfg)])
        return rc, capsys.readouterr().out.splitlines()
    return run


def test_job_check_prints_each_check(job_check, mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.nopk (id INT, v INT)")
    rc, lines = job_check()
    assert rc == 2
    assert [(l.split()[0], l.split()[1]) for l in lines] == [
        ("PASS", "connection"), ("PASS", "tls"), ("PASS", "log_bin"), ("PASS", "binlog_format"),
        ("PASS", "binlog_row_image"), ("PASS", "binlog_row_metadata"), ("PASS", "gtid"),
        ("PASS", "privileges"), ("PASS", "tables"), ("FAIL", "keys"), ("PASS", "retention"),
        ("PASS", "sink")]
    assert lines[8].endswith(f"includeTables matches 2 table(s): {db}.nopk, {db}.t")
    assert f"{db}.nopk has no primary key, which a sink that upserts needs" in lines[9]
    mariadb.execute(f"DROP TABLE {db}.nopk")
    assert job_check()[0] == 0


def test_job_check_names_the_columns_the_delta_upserter_refuses(job_check, mariadb, db):
    """(A column named _cdc_op failed the job only when its table first changed.)"""
    mariadb.execute(f"CREATE TABLE {db}.ops (id INT PRIMARY KEY, _cdc_op CHAR(1))")
    rc, lines = job_check()
    assert rc == 2
    assert lines[-1] == (f"FAIL  sink                   the Delta upserter refuses {db}.ops._cdc_op "
                         f"(the name the Delta upserter gives the change kind in its MERGE: "
                         f"rename the column); or leave the table out with excludeTables")
    mariadb.execute(f"ALTER TABLE {db}.ops RENAME COLUMN _cdc_op TO op")
    rc, lines = job_check()
    assert rc == 0 and lines[-1] == (
        "PASS  sink                   the Delta upserter takes every column of the 2 captured "
        "table(s)")


def test_start_and_stop_metrics_leave_nothing_behind(spark):
    from streaming.metrics import start_metrics, stop_metrics
    listeners = spark.streams._jsqm.listListeners
    before = len(listeners())
    listener = start_metrics(spark, port=0)
    port = listener.port
    assert len(listeners()) == before + 1
    assert b"binlog_cdc_rows" in urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    stop_metrics(spark, listener)
    stop_metrics(spark, listener)                 # twice is harmless
    assert len(listeners()) == before
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


# --- how a query ends --------------------------------------------------------------------------

#: a filter whose task sleeps 60 s a row: a foreachBatch's Spark job still running when the
#: query is stopped (the stop cancels it: the sleep is interrupted)
SLOW = "reflect('java.lang.Thread', 'sleep', CAST(60000 AS BIGINT)) IS NULL"


def _stopped_mid_batch(spark, mariadb, db, tmp_path, batch):
    """A stream of *db*'s inserts into ``foreachBatch`` *batch(df, id)* (df made slow with
    :data:`SLOW`), stopped while *batch*'s Spark job runs (as a job stops one on SIGTERM when a
    batch outlasts the wait): the ended query."""
    from support.spark_support import source_options
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = mariadb.current_position()
    _insert(mariadb, db, range(3))
    entered = threading.Event()

    def slow_batch(df, batch_id):
        entered.set()
        batch(df.where(SLOW), batch_id)

    reader = spark.readStream.format("binlog-cdc")
    for k, v in source_options(mariadb, db, start).items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(slow_batch)
         .option("checkpointLocation", str(tmp_path / "chk")).start())
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 120
    while not (entered.is_set() and tracker.getActiveStageIds()):
        assert q.isActive and time.monotonic() < deadline, q.exception()
        time.sleep(0.1)
    time.sleep(1.0)                     # the task is in its sleep
    q.stop()
    assert not q.isActive
    return q


def test_a_query_stopped_in_the_middle_of_a_delta_batch_stops_cleanly(spark, mariadb, db,
                                                                     tmp_path):
    """The stop cancels the upserter's Spark job: Spark takes the foreachBatch failure for the
    stop's (its status "Stopped", no exception); the batch is not applied, the next run redoes
    it. (The failure's text, a Java stack trace quoted in the Python one, once overflowed the
    stack of Spark's query thread: a StackOverflowError ended the query with no exception and
    the status of a batch still running.)"""
    from streaming.sinks.delta.upserter import DeltaUpserter
    p = mariadb.cdc_params()
    up = DeltaUpserter(tmp_path / "delta", host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="stopped-mid-batch")
    q = _stopped_mid_batch(spark, mariadb, db, tmp_path, up)
    assert q.exception() is None
    assert q.status["message"] == "Stopped", q.status
    assert not (tmp_path / "delta" / db / "t").exists()


def test_a_query_thread_that_died_unreported_is_a_failure(spark, mariadb, db, tmp_path):
    """A foreachBatch that hands Spark its Spark call's whole error (the Java stack trace in it)
    while the query stops: Spark's query thread dies of a StackOverflowError (its regular
    expression for an interruption recurses once per character), with no exception recorded.
    The job and the demo take that ending for the failure it is."""
    q = _stopped_mid_batch(spark, mariadb, db, tmp_path, lambda df, batch_id: df.toArrow())
    assert q.exception() is None
    assert q.status["message"] != "Stopped", \
        f"this Spark survives a long foreachBatch error now: {q.status}"
    from streaming.apps.runtime import QueryEndedError, raise_if_failed
    with pytest.raises(QueryEndedError, match="ended without an error") as e:
        raise_if_failed(q, stop_asked=True)
    assert q.status["message"] in str(e.value)


def test_a_stream_stopped_not_by_the_job_is_a_failure(job_main, spark):
    """Only the job ends its stream (a signal, or availableNow's end): a query that stopped
    otherwise, with no exception, is no success (exit status 1, one line)."""
    def stop_it():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            active = spark.streams.active
            if active and active[0].lastProgress is not None:
                active[0].stop()
                return
            time.sleep(0.2)

    threading.Thread(target=stop_it, daemon=True).start()
    rc, out, err, took = job_main(trigger="1 second")
    assert rc == 1, (out, err)
    msg = _one_error_line(err)
    assert "QueryEndedError" in msg and "not by this program" in msg, msg
    assert not any(l.startswith("stopped") for l in out.splitlines()), out
