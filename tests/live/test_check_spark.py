"""The Spark source runs the FAIL checks of ``binlog-cdc check`` where a query starts: a stream
that starts with a snapshot of a server whose binlog_format is STATEMENT read the whole
snapshot (hours on a real database) before its binlog phase failed; it now fails before any
chunk is read, with the one line that says what to do."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark")

from pyspark.errors import StreamingQueryException  # noqa: E402

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


def test_a_snapshot_of_a_statement_format_server_fails_before_reading(spark, mariadb_factory,
                                                                      tmp_path):
    server = mariadb_factory()
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, n INT)")
    server.execute("INSERT INTO orders SELECT seq, seq FROM seq_1_to_2000", database="shop")
    server.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    opts = source_options(server, "shop", ("x", 4), startingPosition="snapshot",
                          snapshotChunkRows=200, maxEventsPerTrigger=400)
    got: list = []

    def fb(df, batch_id):
        got.extend(df.select("op").collect())

    t = time.monotonic()
    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as e:
        q.awaitTermination(300)
    took = time.monotonic() - t
    assert got == []                                  # 2000 snapshot rows before
    assert "cdc.errors.ServerConfigError: binlog_format is STATEMENT on 127.0.0.1:" \
        f"{server.port}; row-based CDC needs ROW: run SET GLOBAL binlog_format = 'ROW'" \
        in str(e.value)
    assert "Current Committed Offsets: {}" in str(e.value)    # failed as the query started
    assert took < 20, f"took {took:.1f} s"
