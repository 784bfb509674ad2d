"""Batches replayed by a restarted Spark query: its new driver plans the batch from the two
offsets of the checkpoint alone (no Spark session needed: the reader is driven directly)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from streaming._compat import ReadAllAvailable  # noqa: E402

from streaming.source.datasource import BinlogCdcDataSource  # noqa: E402

from support.spark_support import replayed_rows, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]


def test_last_batch_before_a_rotation(server, db):
    """The batch ends at the last transaction of a binlog file the server has closed since
    (FLUSH BINARY LOGS, nothing written after): its end offset resumes where the server's binlog
    continues its GTID state, the start of the next file, and the replay reads up to there."""
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    opts = source_options(server, db, server.current_position())
    server.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
    server.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
    server.execute("FLUSH BINARY LOGS")
    source = BinlogCdcDataSource(opts)
    first = source.streamReader(source.schema())
    s = first.initialOffset()
    e = first.latestOffset(s, ReadAllAvailable())
    delivered = replayed_rows(first, s, e)
    first.stop()
    assert e["file"] == s["file"] != server.current_position()[0]
    want = [("c", {"id": i, "v": v}) for i, v in server.execute(f"SELECT id, v FROM {db}.t")]
    assert delivered == want
    replay = BinlogCdcDataSource(opts).streamReader(source.schema())
    try:
        assert replayed_rows(replay, s, e) == want
    finally:
        replay.stop()
