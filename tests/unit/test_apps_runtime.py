"""streaming.apps.runtime: what the job and the demo make of Spark's errors and progress events
(no Spark needed: the inputs are the texts and dicts Spark produces)."""

from __future__ import annotations

import json

import pytest

from cdc.errors import AuthenticationError, BinlogPurgedError, CdcError, ConfigurationError
from streaming.apps.runtime import (Batches, cdc_error, committed_offset, failure_summary,
                                    is_real_batch, offset_text)

# the shape of str(StreamingQueryException) when the source's initialOffset raised (abridged
# from a real one: the Python traceback is quoted twice, with SQLSTATE suffixes)
SPARK_TEXT = """[STREAM_FAILED] Query [id = 01cb, runId = a47d] terminated with exception: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform \
initialOffset: Traceback (most recent call last):
  File "/work/cdc/replica/sql.py", line 41, in connect
    return pymysql.connect(**kw)
pymysql.err.OperationalError: (1045, "Access denied for user 'cdc'@'127.0.0.1' (using password: YES)")

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/cdc/replica/sql.py", line 53, in connect
    raise mysql_error(e, config, grant=grant) from e
cdc.errors.AuthenticationError: the server (127.0.0.1:3306) refused user 'cdc': check the password
 SQLSTATE: 38000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: [id = 01cb, runId = a47d]
Current Committed Offsets: {}"""


class FakeSparkError(Exception):
    """Stands for pyspark.errors' exceptions: a text, no CdcError object."""


def test_a_cdc_error_inside_spark_text_comes_back_with_its_class_and_message():
    err = cdc_error(FakeSparkError(SPARK_TEXT))
    assert isinstance(err, AuthenticationError)
    assert str(err) == ("the server (127.0.0.1:3306) refused user 'cdc': check the password")


def test_the_outermost_cdc_error_wins():
    text = ("Traceback:\ncdc.errors.ConfigurationError: inner\n\nThe above exception was the "
            "direct cause of the following exception:\n\nTraceback:\n"
            "cdc.errors.BinlogPurgedError: outer, set failOnDataLoss=false SQLSTATE: 38000\n")
    err = cdc_error(FakeSparkError(text))
    assert type(err) is BinlogPurgedError and str(err) == "outer, set failOnDataLoss=false"


def test_cdc_errors_as_they_are_and_through_causes():
    e = ConfigurationError("bad")
    assert cdc_error(e) is e
    try:
        try:
            raise e
        except ConfigurationError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert cdc_error(outer) is e
    assert cdc_error(KeyError("x")) is None
    assert cdc_error(None) is None
    unknown = cdc_error(FakeSparkError("cdc.errors.NoSuchError: what"))
    assert type(unknown) is CdcError and str(unknown) == "what"


def test_failure_summary_is_the_python_error_spark_quotes():
    text = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided "
            "function in foreach batch sink.\nTraceback (most recent call last):\n  File "
            "\"x.py\", line 1\nPermissionError: [Errno 13] Permission denied: '/delta/db'\n"
            " SQLSTATE: 39000\n\nJVM stacktrace:\norg.apache.spark.SparkException: boom")
    assert failure_summary(FakeSparkError(text)) == \
        "PermissionError: [Errno 13] Permission denied: '/delta/db'"
    assert failure_summary(ValueError("plain\nsecond line")) == "ValueError: plain"


def _progress(batch, rows, start, end):
    return {"batchId": batch, "numInputRows": rows,
            "sources": [{"startOffset": None if start is None else json.dumps(start),
                         "endOffset": json.dumps(end)}]}


A = {"file": "mysql-bin.000001", "pos": 100}
B = {"file": "mysql-bin.000001", "pos": 200, "gtid": "0-1-5"}
C = {"file": "mysql-bin.000002", "pos": 4, "gtid": "0-1-6"}


def test_idle_progress_events_are_not_batches():
    assert is_real_batch(_progress(0, 5, None, A))
    assert is_real_batch(_progress(0, 0, None, A))          # the first batch commits A
    assert is_real_batch(_progress(3, 0, A, B))             # filtered transactions: moved on
    assert not is_real_batch(_progress(4, 0, B, B))         # idle: nothing read, nothing moved


class FakeQuery:
    def __init__(self):
        self.recentProgress = []


def test_batches_reports_the_batch_that_idle_events_announced():
    q, batches = FakeQuery(), Batches()
    q.recentProgress = [_progress(0, 5, None, A), _progress(1, 0, A, A)]    # then idle, id 1
    assert [p["batchId"] for p in batches.new(q)] == [0]
    q.recentProgress.append(_progress(1, 0, A, A))                          # idle again
    assert batches.new(q) == []
    q.recentProgress.append(_progress(1, 7, A, B))                          # the real batch 1
    assert [p["batchId"] for p in batches.new(q)] == [1]
    assert batches.new(q) == []                                             # each once
    assert batches.rows == 12 and batches.offset == B
    # a restarted query (same checkpoint) continues the ids and the running total
    q2 = FakeQuery()
    q2.recentProgress = [_progress(2, 3, B, C), _progress(3, 0, C, C)]
    assert [p["batchId"] for p in batches.new(q2)] == [2]
    assert batches.rows == 15 and batches.offset == C


def test_offset_text():
    assert offset_text(A) == "mysql-bin.000001:100"
    assert offset_text(B) == "mysql-bin.000001:200 (GTID 0-1-5)"
    assert offset_text(None) == "?"


def test_committed_offset_reads_a_local_checkpoint(tmp_path):
    assert committed_offset(str(tmp_path)) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    for n, off in enumerate([A, B, C]):
        (tmp_path / "offsets" / str(n)).write_text(f"v1\n{meta}\n{json.dumps(off)}")
    assert committed_offset(str(tmp_path)) is None          # written ahead, none committed
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    (tmp_path / "commits" / "1").write_text("v1\n{}")
    (tmp_path / "commits" / ".1.crc").write_text("")
    assert committed_offset(str(tmp_path)) == B             # batch 2 ran but did not commit
    assert committed_offset(f"file:{tmp_path}") == B
    assert committed_offset("s3://bucket/chk") is None


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_stop_signals_set_the_flag_and_restore_the_handlers(name, capsys):
    import os
    import signal
    from streaming.apps.runtime import StopSignals
    sig = getattr(signal, name)
    before = signal.getsignal(sig)
    with StopSignals("prog") as stop:
        assert not stop
        os.kill(os.getpid(), sig)
        assert stop and stop.name == name and stop.requested.is_set()
    assert signal.getsignal(sig) is before
    assert capsys.readouterr().err == (f"prog: {name}: stopping after the running micro-batch "
                                       f"(again to exit at once) ...\n")


def test_the_demo_prints_a_running_total_batch_after_batch(capsys):
    """Two batches seen in one poll: each line has the total up to that batch (not the sum of
    both); a restarted query continues it."""
    from streaming.apps.demo import ProgressPrinter

    class Timed:
        lags = {0: (0.0, 0.5), 1: (0.2, 1.2), 2: (1.0, 2.0)}

    printer, q = ProgressPrinter(Timed()), FakeQuery()
    q.recentProgress = [_progress(0, 5, None, A), _progress(1, 7, A, B), _progress(2, 0, B, B)]
    printer.poll(q)
    q2 = FakeQuery()
    q2.recentProgress = [_progress(2, 3, B, C)]
    printer.poll(q2)
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines == ["batch   0:     5 changes upserted (total 5), lag 0.0-0.5 s, ? binlog bytes behind",
                     "batch   1:     7 changes upserted (total 12), lag 0.2-1.2 s, ? binlog bytes behind",
                     "batch   2:     3 changes upserted (total 15), lag 1.0-2.0 s, ? binlog bytes behind"]
    assert (printer.rows, printer.printed) == (15, 3)


def test_the_demo_prints_every_batch_and_the_one_that_ends_the_snapshot(capsys):
    """A batch without changes is printed too (the ids the summary counts, none skipped), and
    the batch whose end offset leaves the snapshot says it is done, with the rows it read."""
    from streaming.apps.demo import ProgressPrinter

    class Timed:
        lags = {0: (0.0, 0.5), 1: (0.2, 1.2), 3: (0.1, 1.1)}

    snap = {"snapshot": {"tables": ["d.t"], "after": [500]}}
    report = {"tables": 1, "tablesDone": 0, "tablesLeft": 1, "table": "d.t", "chunks": 2,
              "chunksDone": 1, "rows": 1000, "rowsDone": 500, "rowsPerSecond": None,
              "etaSeconds": None, "done": False}

    def prog(batch, rows, start, end, latest):
        p = _progress(batch, rows, start, end)
        p["sources"][0]["latestOffset"] = json.dumps(latest)
        return p

    printer, q = ProgressPrinter(Timed(), snapshot=True), FakeQuery()
    q.recentProgress = [prog(0, 500, None, dict(A, **snap), {"snapshot": report}),
                        prog(1, 500, dict(A, **snap), A, {"snapshot": report}),
                        prog(2, 0, A, B, {"behindBytes": 10}),
                        prog(3, 4, B, C, {"behindBytes": 0})]
    assert printer.in_snapshot
    printer.poll(q)
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert [l.split(":")[0] for l in lines] == ["batch   0", "batch   1", "batch   2",
                                                "batch   3"]
    assert lines[0].endswith("snapshot of d.t: tables 0/1, chunks 1/2, rows 500/~1,000, rows/s "
                             "not known yet, ETA not known yet")
    assert lines[1].endswith("lag 0.2-1.2 s, snapshot done: 1,000 rows read, the binlog next")
    assert lines[2] == "batch   2:     0 changes upserted (total 1000), lag ?, 10 binlog bytes behind"
    assert lines[3].endswith("(total 1004), lag 0.1-1.1 s, 0 binlog bytes behind")
    assert not printer.in_snapshot and (printer.rows, printer.printed) == (1004, 4)
