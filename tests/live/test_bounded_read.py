"""Bounded batch reads of a live server (issue 17, item 5): ``spark.read`` with option host,
``startingPosition`` and ``endingPosition`` (file/pos, GTID set or ``latest``) is one batch
DataFrame of the changes in the range, read by tasks over replication connections like a
micro-batch: it equals the stream's rows for the same range."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers]


def _reader(spark, options: dict, stream: bool = False):
    r = spark.readStream.format("binlog-cdc") if stream else spark.read.format("binlog-cdc")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _streamed(spark, options: dict, name: str):
    q = (_reader(spark, options, stream=True).writeStream.format("memory").queryName(name)
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240), "availableNow query did not stop"
    assert q.exception() is None
    return sorted(spark.table(name).collect(), key=lambda r: r.seq)


def _tx(cur, ids, note):
    cur.execute("INSERT INTO t VALUES " + ",".join(f"({i}, '{note}{i}')" for i in ids))


@pytest.mark.compat("bounded read of a live server")
def test_bounded_reads_equal_the_streams_rows(spark, mariadb, db):
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    marks = {}
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(30))")
        for k in range(10):
            _tx(cur, range(k * 100, k * 100 + 100), "a")
        cur.execute("FLUSH BINARY LOGS")
        for k in range(10, 15):
            _tx(cur, range(k * 100, k * 100 + 100), "b")
        marks["mid"] = mariadb.current_position()
        marks["gtid"] = mariadb.gtid_executed()
        cur.execute("UPDATE t SET note = 'u' WHERE id < 300")
        cur.execute("DELETE FROM t WHERE id >= 1400")
        marks["end"] = mariadb.current_position()
    opts = source_options(mariadb, db, start, minPartitions=3, maxBytesPerPartition=20000)

    streamed = _streamed(spark, opts, "bounded_all")
    assert len(streamed) == 1500 + 300 + 100

    # up to the binlog end (latest): every change, in several tasks over the two files
    latest = _reader(spark, {**opts, "endingPosition": "latest"})
    assert latest.rdd.getNumPartitions() >= 3
    assert sorted(latest.collect(), key=lambda r: r.seq) == streamed
    assert latest.schema == _reader(spark, opts, stream=True).schema

    # up to a file/pos: the transactions that end there or before
    mid = json.dumps({"file": marks["mid"][0], "pos": marks["mid"][1]})
    upto_mid = sorted(_reader(spark, {**opts, "endingPosition": mid}).collect(),
                      key=lambda r: r.seq)
    assert len(upto_mid) == 1500 and {r.op for r in upto_mid} == {"c"}
    assert upto_mid == streamed[:1500]

    # from there to the end
    rest = _reader(spark, {**opts, "startingPosition": mid, "endingPosition": "latest"})
    assert sorted(rest.collect(), key=lambda r: r.seq) == streamed[1500:]

    # up to a GTID set: the transactions in it
    by_gtid = _reader(spark, {**opts, "endingPosition": json.dumps({"gtid": marks["gtid"]})})
    assert sorted(by_gtid.collect(), key=lambda r: r.seq) == streamed[:1500]

    # an empty range
    assert _reader(spark, {**opts, "startingPosition": mid, "endingPosition": mid}).count() == 0

    # without endingPosition a batch read with host is still the snapshot of the tables
    snap = _reader(spark, {k: v for k, v in opts.items() if k != "startingPosition"})
    assert snap.count() == 1400 and {r.op for r in snap.collect()} == {"r"}
    conn.close()


def test_bounded_read_option_errors(spark, mariadb, db):
    start = mariadb.current_position()
    opts = source_options(mariadb, db, start)
    with pytest.raises(Exception, match="endingPosition must be latest, a file/pos or a GTID"):
        _reader(spark, {**opts, "endingPosition": "earliest"}).collect()
    with pytest.raises(Exception, match="snapshot and endingPosition exclude each other"):
        _reader(spark, {**opts, "startingPosition": "snapshot",
                        "endingPosition": "latest"}).collect()
