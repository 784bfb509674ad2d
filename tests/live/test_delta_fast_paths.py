"""DeltaUpserter's shortcuts give the Delta tables of its general paths, on a real stream.

A snapshot (several chunks in one micro-batch, whose seqs restart with each chunk) and then
binlog batches of a real MariaDB -- an UPDATE of every row (no key changed), primary-key
changes, JSON ``null`` against SQL NULL, deletes, re-inserts, a TRUNCATE -- are captured from
the ``binlog-cdc`` source (JSON envelope, and typed mode) and replayed into three upserters:
as it is (the Arrow fast paths with their shortcuts), the candidate walk without shortcuts,
and the per-value path; the typed streams also go straight into an upserter as a user's
``foreachBatch`` (which collects a typed stream narrowed: streaming.sinks.delta.narrow). Tables: the type matrix (every column type, extremes, NULLs, zero
dates), a table of every type the JSON reader takes, and a two-column key. The three Delta
tables are equal, value for value, and hold the keys of ``SELECT`` on the server.

Binary columns (every byte value, empty, NULL), JSON documents (MySQL's: the null literal
against SQL NULL, strings, numbers, nested; MariaDB's are text) and GEOMETRY, on MySQL and
MariaDB: the fast path reads them (no per-value fallback) into the per-value path's Delta table,
whose values are the server's ``SELECT``.
"""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

import streaming.sinks.delta.last_change as lc  # noqa: E402
import streaming.sinks.delta.narrow as narrow  # noqa: E402
import streaming.sinks.delta.upserter as upserter_module  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402

from support.spark_support import source_options  # noqa: E402
from test_delta import run_available_now  # noqa: E402
from test_types_live import fill_matrix  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]

READABLE = """CREATE TABLE r (id BIGINT PRIMARY KEY, u BIGINT UNSIGNED, i INT, dc DECIMAL(12,2),
    dw DECIMAL(30,10), f FLOAT, d DOUBLE, vc VARCHAR(40) CHARACTER SET utf8mb4,
    e ENUM('a','b','c'), st SET('x','y','z'), dtm DATETIME(6), ts TIMESTAMP(6) NULL, dd DATE,
    t TIME(3), y YEAR, ti TINYINT)"""
COMPOSITE = """CREATE TABLE k (region VARCHAR(10), n INT, val DECIMAL(30,10) NULL,
    label VARCHAR(20) NULL, PRIMARY KEY (region, n))"""
BLOBS = """CREATE TABLE b (id INT PRIMARY KEY, bl BLOB, tb TINYBLOB, vb VARBINARY(600),
    bn BINARY(16), j JSON, g GEOMETRY NULL)"""
EVERY_BYTE = "X'" + bytes(range(256)).hex() + "'"
BLOB_ROWS = [
    f"(1, {EVERY_BYTE}, X'', X'00ff', X'00', "
    "'{\"a\": [1, 2.5, null, {\"b\": \"é\\\\\\\"x😀\"}], \"n\": 1e300, \"d\": 12.50}', "
    "ST_GeomFromText('POINT(1 2)', 4326))",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, '', '', '', '', 'null', ST_GeomFromText('POINT(0 0)'))",
    f"(4, REVERSE({EVERY_BYTE}), X'ff', CONCAT({EVERY_BYTE}, {EVERY_BYTE}), X'ffff', "
    "'\"a string\"', ST_GeomFromText('LINESTRING(0 0, 1 1, 2 5)'))",
    "(5, X'41', X'3d', X'3d3d', X'0a', '12.50', ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'))",
    "(6, X'00', NULL, '', NULL, '[]', NULL)", "(7, NULL, '', NULL, '', '{}', NULL)",
    "(8, NULL, NULL, NULL, NULL, '-1e-300', NULL)", "(9, NULL, NULL, NULL, NULL, 'true', NULL)",
]
BLOB_STEPS = [
    ["UPDATE b SET j = 'null' WHERE id = 2", "UPDATE b SET j = NULL WHERE id = 1",
     "UPDATE b SET bl = '', vb = REVERSE(vb) WHERE id = 4", "UPDATE b SET id = 13 WHERE id = 3"],
    ["DELETE FROM b WHERE id = 5",
     "INSERT INTO b (id, bl, j) VALUES (5, X'ff00', '{\"k\": [true, false, \"\"]}')"],
]
KEYS = {"m": ["id"], "r": ["id"], "k": ["region", "n"], "b": ["id"]}

STEPS = [
    # an UPDATE of every row, no key changed
    ["UPDATE r SET dc = dc + 1, vc = CONCAT(vc, '!'), ts = ts + INTERVAL 1 SECOND",
     "UPDATE k SET val = val * 2", "UPDATE m SET vc = CONCAT(vc, '✓') WHERE id IN (2, 4)"],
    # primary keys moved, JSON null against SQL NULL; no deletes
    ["UPDATE r SET id = id + 1000 WHERE id <= 3", "UPDATE k SET region = 'as' WHERE n = 1",
     "UPDATE m SET j = 'null' WHERE id = 1", "UPDATE m SET j = NULL WHERE id = 5",
     "UPDATE m SET id = id + 10 WHERE id = 4"],
    # deletes, a re-insert, a truncate and what follows it
    ["DELETE FROM r WHERE id IN (5, 6)", "INSERT INTO r (id, i, vc) VALUES (5, 55, 'back')",
     "UPDATE r SET id = 6 WHERE id = 7", "TRUNCATE TABLE k",
     "INSERT INTO k VALUES ('eu', 1, 1.5, 'after')", "DELETE FROM m WHERE id = 2",
     "INSERT INTO m (id, vc) VALUES (2, 'back')"],
]


def _fill(mariadb, db):
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        fill_matrix(cur)                            # m: the type matrix, ids 1-4
        cur.execute("INSERT INTO m (id, j) VALUES (5, 'null')")     # JSON null, not SQL NULL
        cur.execute(READABLE)
        cur.execute(
            "INSERT INTO r SELECT seq, IF(seq % 5 = 0, NULL, 18446744073709551615 - seq), "
            "seq * 7 - 100, seq / 4, IF(seq % 6 = 0, NULL, seq * 1000000.0000000001), "
            "seq + 0.5, -seq / 8, IF(seq % 4 = 0, NULL, CONCAT('é😀 \"', seq, '\\n')), "
            "ELT(1 + seq % 3, 'a', 'b', 'c'), IF(seq % 2, 'x,z', ''), "
            "'2024-01-01 00:00:00.5' + INTERVAL seq HOUR, "
            "IF(seq % 7 = 0, NULL, '2020-05-06 07:08:09.123456' + INTERVAL seq MINUTE), "
            "'1000-01-01' + INTERVAL seq * 97 DAY, SEC_TO_TIME(seq * 3601 - 3600 * 20), "
            "1901 + seq, seq - 128 FROM (SELECT CAST(seq AS SIGNED) AS seq FROM seq_1_to_40) s")
        cur.execute(COMPOSITE)
        cur.execute("INSERT INTO k SELECT ELT(1 + seq % 3, 'eu', 'us', 'as'), seq, "
                    "IF(seq % 3 = 0, NULL, seq / 3), CONCAT('l', seq) FROM seq_1_to_30")
    conn.close()


def _capture(spark, opts, checkpoint, out, up=None):
    """Each micro-batch's changes as Arrow into *out*; *up*: also upserted as a user's
    ``foreachBatch(up)`` does (a typed stream's narrow collect: streaming.sinks.delta.narrow)."""
    def fb(df, batch_id):
        out.append((batch_id, df.select(*DeltaUpserter.columns_of(df)).toArrow()))
        if up is not None:
            up(df, batch_id)
    q = run_available_now(spark, opts, fb, checkpoint)
    assert q.exception() is None, q.exception()


class _PerValue(DeltaUpserter):
    """The general path: every table's changes sorted by seq and walked value by value."""

    def _last_changes_of(self, db, name, part, typed, in_order=True):
        part = lc.in_seq_order(part)
        rows = list(zip(*(part.column(c).to_pylist() for c in ("op", "before", "after", "seq"))))
        return self._last_changes(db, name, rows, typed, fast=False)


def _replay(mariadb, root, batches, cls=DeltaUpserter):
    p = mariadb.cdc_params()
    up = cls(str(root), host=p["host"], port=p["port"], user=p["user"], password=p["password"],
             app_id="fast-paths")
    try:
        for batch_id, t in batches:
            up.upsert_arrow(t, batch_id)
    finally:
        up.close()


def _delta(root, db, table):
    return DeltaTable(str(root / db / table)).to_pyarrow_table().sort_by(
        [(k, "ascending") for k in KEYS[table]])


def test_shortcuts_give_the_general_paths_delta_tables(spark, mariadb, db, tmp_path, caplog,
                                                       monkeypatch):
    _fill(mariadb, db)
    start = mariadb.current_position()
    queries = {"json": source_options(mariadb, db, start, snapshotChunkRows=6)}
    for table in ("m", "r", "k"):
        opts = source_options(mariadb, db, start, snapshotChunkRows=6, table=f"{db}.{table}")
        del opts["includeTables"]
        queries[f"typed {table}"] = opts
    captured = {name: [] for name in queries}
    # typed streams also straight into an upserter, which collects them narrowed
    narrowed = []

    def widen(collected, *table):
        out = narrow.widen(collected, *table)
        if out is not None:
            narrowed.append(table)
        return out
    monkeypatch.setattr(upserter_module, "widen", widen)
    p = mariadb.cdc_params()
    users = {name: DeltaUpserter(str(tmp_path / f"{name}-user".replace(" ", "-")), app_id="u",
                                 host=p["host"], port=p["port"], user=p["user"],
                                 password=p["password"])
             for name in queries if name.startswith("typed")}
    for step in [[]] + STEPS:
        for sql in step:
            mariadb.execute(sql, database=db)
        for name, opts in queries.items():
            opts["startingPosition"] = "snapshot"        # the checkpoint's offset after the first
            _capture(spark, opts, tmp_path / f"chk-{name}", captured[name], users.get(name))
    for up in users.values():
        up.close()
    assert {t for _db, t in narrowed} == {"m", "r", "k"}

    # the snapshot's batch holds several chunks of r whose seqs are not in order: the shortcut
    r_order = [in_order for _id, batch in captured["json"]
               for (_db, table), _part, in_order in lc.by_table(batch) if table == "r"]
    assert False in r_order and True in r_order

    for name, batches in captured.items():
        roots = {path: tmp_path / f"{name}-{path}".replace(" ", "-")
                 for path in ("fast", "walk", "per-value")}
        with caplog.at_level(logging.DEBUG, logger="binlog_cdc.delta"):
            caplog.clear()
            _replay(mariadb, roots["fast"], batches)
        fell_back = caplog.text
        with monkeypatch.context() as m:
            m.setattr(lc, "_unique", lambda *a: False)
            _replay(mariadb, roots["walk"], batches)
        _replay(mariadb, roots["per-value"], batches, _PerValue)
        tables = [name[len("typed "):]] if name.startswith("typed") else ["m", "r", "k"]
        for table in tables:
            if table != "m" or name == "typed m":       # the JSON matrix goes value by value
                assert f"{db}.{table}: per-value path" not in fell_back, (name, table)
            fast = _delta(roots["fast"], db, table)
            if name in users:                           # the narrow collect's table
                roots["user"] = tmp_path / f"{name}-user".replace(" ", "-")
            for other in [r for r in roots if r != "fast"]:
                got = _delta(roots[other], db, table)
                assert got.schema == fast.schema, (name, table, other)
                for col in fast.column_names:
                    assert got.column(col).to_pylist() == fast.column(col).to_pylist(), \
                        (name, table, other, col)
            keys = KEYS[table]
            src = mariadb.execute(f"SELECT {', '.join(keys)} FROM `{db}`.`{table}` "
                                  f"ORDER BY {', '.join(keys)}")
            assert [tuple(r[k] for k in keys) for r in fast.select(keys).to_pylist()] == \
                [tuple(r) for r in src], (name, table)


@pytest.mark.servers("mysql-9.7", "mariadb-10.11")
def test_binary_json_and_geometry_tables_stay_on_the_fast_path(spark, mariadb, db, tmp_path):
    mariadb.execute(BLOBS, database=db)
    mariadb.execute("INSERT INTO b VALUES " + ", ".join(BLOB_ROWS), database=db)
    start = mariadb.current_position()
    opts = source_options(mariadb, db, start, snapshotChunkRows=4)
    batches: list = []
    for step in [[]] + BLOB_STEPS:
        for sql in step:
            mariadb.execute(sql, database=db)
        opts["startingPosition"] = "snapshot"
        _capture(spark, opts, tmp_path / "chk", batches)
    per_value: list = []

    class Watched(DeltaUpserter):
        def _images(self, tbl, changes, typed):     # the per-value path's only way in
            per_value.append(len(changes))
            return super()._images(tbl, changes, typed)
    _replay(mariadb, tmp_path / "fast", batches, Watched)
    assert per_value == []
    _replay(mariadb, tmp_path / "per-value", batches, _PerValue)
    fast, slow = _delta(tmp_path / "fast", db, "b"), _delta(tmp_path / "per-value", db, "b")
    assert slow.schema == fast.schema
    assert slow.to_pylist() == fast.to_pylist()
    doc = "CAST(j AS CHAR)" if mariadb.FLAVOR == "mysql" else "j"
    src = mariadb.execute(f"SELECT id, bl, tb, vb, bn, {doc}, g FROM `{db}`.b ORDER BY id")
    want = [dict(zip(["id", "bl", "tb", "vb", "bn", "j", "g"],
                     [bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in r]))
            for r in src]
    assert fast.to_pylist() == want
    assert {r["id"] for r in want} == {1, 2, 4, 5, 6, 7, 8, 9, 13}


@pytest.mark.parametrize("mode", ["json", "typed"])
def test_snapshot_with_the_upserters_fields_equals_select(spark, mariadb, db, tmp_path, mode):
    """A snapshot read with option fields = the upserter's (no key, so the chunks' tasks skip
    its JSON; seq and the null before images built per batch: streaming.source.snapshot),
    several chunks in one micro-batch, straight into ``foreachBatch(DeltaUpserter)``: the type
    matrix and the table of every type the JSON reader takes equal ``SELECT *``."""
    from streaming.contract.envelope import UPSERT_FIELDS
    from test_delta import as_delta, upserter
    _fill(mariadb, db)
    root = tmp_path / "delta"
    for table in ("m", "r"):
        opts = source_options(mariadb, db, ("-", 0), snapshotChunkRows=3,
                              fields=",".join(UPSERT_FIELDS))
        opts["startingPosition"] = "snapshot"
        if mode == "typed":
            del opts["includeTables"]
            opts["table"] = f"{db}.{table}"
        elif table == "r":
            continue                    # the JSON stream read both tables
        q = run_available_now(spark, opts, upserter(mariadb, root), tmp_path / f"chk-{table}")
        assert q.exception() is None, q.exception()
    for table in ("m", "r"):
        got = _delta(root, db, table)
        src = mariadb.execute(f"SELECT * FROM `{db}`.`{table}` ORDER BY id")
        assert got.num_rows == len(src) > 3, table
        for row, have in zip(src, got.to_pylist()):
            for field, want in zip(got.schema, row):
                assert have[field.name] == as_delta(field.type, want), (table, row[0], field.name)
