"""What the Spark source's driver side asks the server for, counted on real servers (the
server's own ``Connections`` and ``Questions``): a trigger that finds nothing new after a batch
that read up to the binlog's end opens no connection (it used to open a replication connection,
run its checks and start a dump that found nothing, once after every batch).

The stream reader is driven in Spark's order for ``availableNow`` (the next trigger asks for
the latest offset before the finished batch is committed), without a Spark session.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from streaming.source.datasource import BinlogCdcDataSource  # noqa: E402

pytestmark = pytest.mark.servers("mysql-9.7", "mariadb-11.8", "mariadb-10.11")


def _counts(server) -> dict[str, int]:
    rows = server.execute("SHOW GLOBAL STATUS WHERE Variable_name IN "
                          "('Connections', 'Questions')")
    return {str(k): int(v) for k, v in rows}


def _asked(server, fn):
    """(what *fn* returned, new connections, statements) on *server* (less the count's own)."""
    before = _counts(server)
    out = fn()
    after = _counts(server)
    return out, after["Connections"] - before["Connections"], \
        after["Questions"] - before["Questions"] - 1


def _reader(server, db, start_file):
    p = server.cdc_params()
    ds = BinlogCdcDataSource({"host": p["host"], "port": str(p["port"]), "user": p["user"],
                              "password": p["password"], "includeTables": f"{db}.*",
                              "startingPosition": json.dumps({"file": start_file, "pos": 4}),
                              "maxEventsPerTrigger": "1000"})
    return ds.streamReader(ds.schema())


def test_trigger_after_a_batch_to_the_binlog_end_opens_no_connection(server, db):
    server.flush_binary_logs()
    start_file, _ = server.current_position()
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    for i in range(3):
        server.execute(f"INSERT INTO {db}.t VALUES ({i}, {i})")
    r = _reader(server, db, start_file)
    try:
        r.prepareForTriggerAvailableNow()
        limit = r.getDefaultReadLimit()
        start = r.initialOffset()
        end = r.latestOffset(start, limit)
        # the batch reads up to the end of the binlog: its last transaction ends there
        assert (end["file"], end["pos"]) == server.current_position()
        assert len(r.partitions(start, end)) == 1
        again, connections, statements = _asked(server, lambda: r.latestOffset(end, limit))
        assert again == end
        assert connections == 0, f"{connections} connection(s), {statements} statement(s)"
        assert statements <= 2, statements     # the binlog's end and file list

        # a change after it is still found (by a scan from the batch's end)
        server.execute(f"INSERT INTO {db}.t VALUES (10, 10)")
        r.prepareForTriggerAvailableNow()
        later = r.latestOffset(end, limit)
        assert (later["file"], later["pos"]) == server.current_position() != \
            (end["file"], end["pos"])
    finally:
        r.stop()
