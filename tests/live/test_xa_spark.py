"""XA transactions through the Spark source, on MySQL 9.7, MariaDB 11.8 and MariaDB 10.11 (the
workload of :mod:`support.xa_workload`).

* A query stopped while ``x4`` is prepared (its offset names it) and restarted from its
  checkpoint after the XA COMMIT (on a later binlog file): ``x2``'s rolled-back insert never
  arrives, ``x4``'s changes arrive once, in the batch of the XA COMMIT, with its ``seq`` and
  ``source``; the Delta table equals ``SELECT *``.
* A batch over both files replayed by a new driver (a restarted query plans it from the offsets
  alone): the task of the XA COMMIT's chunk reads the prepared transaction again.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402
from streaming._compat import ReadAllAvailable  # noqa: E402

from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402
from streaming.source.datasource import BinlogCdcDataSource  # noqa: E402

from support.spark_support import source_options  # noqa: E402
from support.xa_workload import (EXPECTED, FIRST, first_part, make_table,  # noqa: E402
                                 rollback_prepared, second_part, server_rows)

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mysql-9.7", "mariadb-11.8", "mariadb-10.11")]


@pytest.fixture(autouse=True)
def no_prepared_left(server, db):
    """A test that fails between an XA PREPARE and its decision leaves it prepared."""
    yield
    rollback_prepared(server)


def run_stream(spark, server, db, options, tmp_path, seen: list):
    """One availableNow run from the checkpoint under tmp_path into Delta tables (and *seen*:
    ``(batch, op, id, v, seq, source file)`` in seq order)."""
    p = server.cdc_params()
    up = DeltaUpserter(tmp_path / "delta", host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="xa-app")

    def fb(df, batch_id):
        for r in df.orderBy("seq").collect():
            after = json.loads(r.after)
            seen.append((batch_id, r.op, after["id"], after["v"], r.seq, r.source.file))
        up(df, batch_id)

    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(fb)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    assert q.awaitTermination(180), "availableNow query did not stop in 180 s"
    assert q.exception() is None, q.exception()


def last_offset(tmp_path) -> dict:
    logs = sorted((tmp_path / "chk" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    return json.loads(logs[-1].read_text().strip().splitlines()[-1])


def delta_rows(tmp_path, db) -> list[tuple]:
    tbl = DeltaTable(str(tmp_path / "delta" / db / "t")).to_pyarrow_table()
    return sorted((r["id"], r["v"]) for r in tbl.to_pylist())


def test_query_restarted_between_prepare_and_commit(spark, server, db, tmp_path):
    start = make_table(server, db)
    first_part(server, db)
    options = source_options(server, db, start)
    seen: list = []
    run_stream(spark, server, db, options, tmp_path, seen)
    assert [(op, k, v) for _, op, k, v, _, _ in seen] == FIRST
    # the checkpoint names x4, held: its XA PREPARE's place
    held = last_offset(tmp_path)["xa"]
    assert [x[0] for x in held] == ["X'7834',X'',1"] and held[0][1] == start[0]
    second_part(server, db)
    before = len(seen)
    run_stream(spark, server, db, options, tmp_path, seen)
    rest = seen[before:]
    assert [(op, k, v) for _, op, k, v, _, _ in rest] == EXPECTED[3:]
    # in one batch, at the XA COMMIT's place: the new file, after everything before
    assert len({b for b, *_ in rest}) == 1
    assert {f for *_, f in rest} == {server.current_position()[0]} != {start[0]}
    seqs = [s for *_, s, _ in seen]
    assert seqs == sorted(seqs)
    assert "xa" not in last_offset(tmp_path)
    assert delta_rows(tmp_path, db) == server_rows(server, db)


def test_replayed_batch_over_a_rotation(server, db):
    start = make_table(server, db)
    first_part(server, db)
    second_part(server, db)
    options = source_options(server, db, start)
    source = BinlogCdcDataSource(options)
    reader = source.streamReader(source.schema())
    s = reader.initialOffset()
    e = reader.latestOffset(s, ReadAllAvailable())
    reader.stop()
    assert json.loads(json.dumps(e))["file"] != s["file"]
    # a new reader: a restarted driver plans the batch from the two offsets alone
    replay = BinlogCdcDataSource(options).streamReader(source.schema())
    parts = replay.partitions(s, e)
    rows = []
    for part in parts:
        for batch in replay.read(part):
            rows += batch.to_pylist()
    replay.stop()
    got = [(r["op"], json.loads(r["after"])["id"], json.loads(r["after"])["v"])
           for r in sorted(rows, key=lambda r: r["seq"])]
    assert got == EXPECTED
    assert len(parts) >= 2 and any(p.xa for p in parts)


def test_batch_read_of_archived_files(server, db, tmp_path):
    """One task per file: the task of the XA COMMIT's file finds the prepared transaction in
    the file before it."""
    start = make_table(server, db)
    first_part(server, db)
    second_part(server, db)
    files = server.snapshot_binlogs(tmp_path / "binlogs", since_file=start[0])
    source = BinlogCdcDataSource({"path": str(tmp_path / "binlogs"), "includeTables": f"{db}.*"})
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert len(parts) == len(files) >= 2
    rows = [r for part in parts for batch in reader.read(part) for r in batch.to_pylist()]
    got = [(r["op"], json.loads(r["after"])["id"], json.loads(r["after"])["v"])
           for r in sorted(rows, key=lambda r: r["seq"])]
    assert got == EXPECTED
