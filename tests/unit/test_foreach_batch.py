"""streaming.sinks.foreach_batch: what a foreachBatch function's exception becomes before Spark reads it
(the live check, a query stopped in the middle of a Delta batch, is in tests/live/test_apps.py)."""

from __future__ import annotations

import traceback

import pytest

from cdc.errors import ConfigurationError
from streaming.apps.runtime import cdc_error
from streaming.sinks.foreach_batch import MAX_TEXT, ForeachBatchError, for_spark, spark_safe

FRAMES = "".join(f"\tat org.apache.spark.scheduler.DAGScheduler.step{i}(DAGScheduler.scala:{i})\n"
                 for i in range(120))
# the shape of str(Py4JJavaError) of a Spark call cancelled by the query's stop (abridged)
JAVA = ("An error occurred while calling o82.getResult.\n"
        ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n" + FRAMES +
        "Caused by: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 0 cancelled Query "
        "[id = bf2f, runId = c57b] was stopped SQLSTATE: XXKDA\n" + FRAMES + "\t... 12 more\n")


class Py4JJavaError(Exception):
    """Stands for py4j's: a message with the Java stack traces of every cause."""


def test_a_spark_call_error_loses_its_java_frames_and_keeps_every_cause():
    exc = Py4JJavaError(JAVA)
    out = for_spark(exc)
    assert isinstance(out, ForeachBatchError) and out.original is exc
    text = str(out)
    assert len(text) <= MAX_TEXT and "\tat " not in text and "more" not in text
    assert text.splitlines() == [
        "test_foreach_batch.Py4JJavaError: An error occurred while calling o82.getResult.",
        ": org.apache.spark.SparkException: Exception thrown in awaitResult: ",
        "Caused by: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 0 cancelled "
        "Query [id = bf2f, runId = c57b] was stopped SQLSTATE: XXKDA"]


def test_a_short_error_is_raised_as_it_is_without_its_chain():
    @spark_safe
    def batch(df, batch_id):
        try:
            raise Py4JJavaError(JAVA)
        except Py4JJavaError:     # an error raised while handling a Spark call's
            raise ConfigurationError("DeltaUpserter: shop.t has no primary key")

    with pytest.raises(ConfigurationError) as e:
        batch(None, 0)
    text = "".join(traceback.format_exception(e.value))      # what Py4J sends Spark
    assert "An error occurred" not in text and len(text) < 2 * MAX_TEXT, text
    assert text.rstrip().endswith("cdc.errors.ConfigurationError: DeltaUpserter: shop.t has no "
                                  "primary key")


def test_a_long_text_keeps_its_first_and_last_lines_and_the_binlog_cdc_error():
    lines = [f"  File \"/work/streaming/x.py\", line {i}, in f{i}" for i in range(200)]
    exc = RuntimeError("Job aborted due to stage failure: Traceback (most recent call last):\n"
                       + "\n".join(lines) + "\ncdc.errors.BinlogPurgedError: mysql-bin.000003 was "
                       "purged (set failOnDataLoss=false to skip lost data)")
    text = str(for_spark(exc))
    assert len(text) <= MAX_TEXT
    assert text.splitlines()[0] == ("RuntimeError: Job aborted due to stage failure: Traceback "
                                    "(most recent call last):")
    assert "line(s) left out]" in text.splitlines()[1]
    err = cdc_error(ForeachBatchError(text, exc))       # what the job reports, exit status 2
    assert type(err).__name__ == "BinlogPurgedError" and "failOnDataLoss" in str(err)
