"""The Spark source asks a MySQL 8.4+ server (MySQL 9.7 here) for its binlog end in the server's
own words (``SHOW BINARY LOG STATUS``: ``SHOW MASTER STATUS`` is gone there) in every place it
asks: a FULL-metadata stream whose first ALTER makes the schema history read a table, and a
MINIMAL-metadata query restarted after ``CREATE TABLE ... LIKE``, decode their rows as the
server's SELECT shows them."""

from __future__ import annotations

import json

import pytest

pyspark = pytest.importorskip("pyspark")

from support.spark_support import batch_rows, fresh_database, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]

_dbs = iter(range(1, 1000))


def _database(server) -> str:
    return fresh_database(server, f"bes{next(_dbs)}")


def run_batches(spark, options: dict, checkpoint) -> list:
    """Run the stream with availableNow: [(op, db.table, after dict)] in binlog order."""
    got = batch_rows(spark, options, checkpoint,
                     lambda r: (r.op, f"{r.db}.{r.table}", json.loads(r.after)))
    return [r for _, rows in sorted(got.items()) for r in rows]


def _selected(server, db: str, table: str) -> list:
    """The table's rows as the server's SELECT shows them: [{column: value}] by id."""
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY id")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        conn.close()


def test_full_metadata_stream_survives_its_first_alter_on_mysql_97(spark, mysql97, tmp_path):
    db = _database(mysql97)
    mysql97.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))")
    start = mysql97.current_position()
    mysql97.execute(f"INSERT INTO {db}.t VALUES (1, 'one')")
    mysql97.execute(f"ALTER TABLE {db}.t ADD COLUMN b INT")
    mysql97.execute(f"INSERT INTO {db}.t VALUES (2, 'two', 20)")
    rows = run_batches(spark, source_options(mysql97, db, start), tmp_path / "ckpt")
    assert [after for _, _, after in rows] == [
        {"id": 1, "a": "one"}, {"id": 2, "a": "two", "b": 20}]
    assert rows[-1][2] == _selected(mysql97, db, "t")[-1]


def test_minimal_metadata_query_restarted_after_create_table_like(spark, mysql97_minimal,
                                                                   tmp_path):
    server = mysql97_minimal
    db = _database(server)
    server.execute(f"CREATE TABLE {db}.y (id INT PRIMARY KEY, a VARCHAR(10))")
    start = server.current_position()
    server.execute(f"INSERT INTO {db}.y VALUES (1, 'one')")
    opts = source_options(server, db, start, includeTables=f"{db}.x*")   # y is not captured
    ckpt = tmp_path / "ckpt"
    assert run_batches(spark, opts, ckpt) == []

    # the query is stopped; x is made like y, which the history does not know: the restarted
    # query's history (from its offsets) reads x from information_schema, at the binlog's end
    server.execute(f"CREATE TABLE {db}.x LIKE {db}.y")
    assert run_batches(spark, opts, ckpt) == []
    server.execute(f"INSERT INTO {db}.x VALUES (2, 'two')")
    assert run_batches(spark, opts, ckpt) == [("c", f"{db}.x", _selected(server, db, "x")[0])]
