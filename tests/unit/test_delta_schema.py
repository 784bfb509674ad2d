"""DeltaUpserter follows the source's DDL (streaming.sinks.delta.ddl): hand-built batches with
schema-change records (op 's', the ``schema_change`` JSON column of the source's option
includeSchemaChanges) applied in seq order with the rows, checked against the Delta table's rows
and schema; a replayed batch applies nothing twice; what cannot be applied stops before anything
is written."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.errors import ConfigurationError, SchemaError  # noqa: E402
from cdc.values.render import to_json_text  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo  # noqa: E402

UTF8MB4 = 45
DB = "shop"


def _col(i, name, code, meta=None, collation=None):
    c = ColumnDef(i, code, meta, True)
    c.name, c.collation = name, collation
    return c


START = TableInfo([_col(0, "id", T.LONG), _col(1, "v", T.VARCHAR, 80, UTF8MB4),
                   _col(2, "n", T.LONG)], ["id"])


def col(name, type_, nullable=True, default=None, default_expr=False, charset=None):
    if charset is None and ("char" in type_ or "text" in type_ or "enum" in type_):
        charset = "utf8mb4"
    return {"name": name, "type": type_, "nullable": nullable, "charset": charset,
            "default": default, "default_expr": default_expr}


ID, V, N = col("id", "int(11)", False), col("v", "varchar(20)"), col("n", "int(11)")


def rec(kind, ddl, columns, pk=("id",), renamed_from=None, renamed_columns=None):
    return json.dumps({"type": kind, "ddl": ddl, "renamed_from": renamed_from,
                       "renamed_columns": renamed_columns or {}, "columns": columns,
                       "primary_key": list(pk) if columns is not None else [],
                       "unsure": False})


class Batch:
    """Changes in seq order: ``c``/``u``/``d``/``t`` rows and ``s`` records."""

    def __init__(self):
        self.rows = []

    def _add(self, op, table, before=None, after=None, change=None):
        seq = "0000000001:%012d:%010d" % (len(self.rows) * 100 + 4, 0)
        self.rows.append((op, DB, table, None if before is None else to_json_text(before),
                          None if after is None else to_json_text(after), seq, change))
        return self

    def c(self, table, **after):
        return self._add("c", table, after=after)

    def u(self, table, before, **after):
        return self._add("u", table, before=before, after=after)

    def d(self, table, **before):
        return self._add("d", table, before=before)

    def t(self, table):
        return self._add("t", table)

    def s(self, table, record):
        return self._add("s", table, change=record)

    def arrow(self, with_schema_change=True):
        cols = list(zip(*self.rows)) if self.rows else [[]] * 7
        names = ["op", "db", "table", "before", "after", "seq", "schema_change"]
        t = pa.table({n: pa.array(list(v), pa.string()) for n, v in zip(names, cols)})
        return t if with_schema_change else t.drop_columns(["schema_change"])


def upserter(root, app_id="app"):
    return DeltaUpserter(str(root), app_id=app_id, columns=lambda db, table: START)


def delta(root, table):
    dt = deltalake.DeltaTable(str(root / DB / table))
    data = dt.to_pyarrow_table()
    rows = sorted((tuple(r.values()) for r in data.to_pylist()),
                  key=lambda r: tuple((x is None, x) for x in r))
    return data.column_names, rows


def delta_types(root, table):
    dt = deltalake.DeltaTable(str(root / DB / table))
    return {f.name: str(f.type) for f in dt.schema().fields}


def version(root, table):
    return deltalake.DeltaTable(str(root / DB / table)).version()


def seeded(tmp_path):
    up = upserter(tmp_path)
    up.upsert_arrow(Batch().c("t", id=1, v="a", n=1).c("t", id=2, v="b", n=2).arrow(False), 0)
    return up


ADD_W = ("ALTER TABLE t ADD COLUMN w int NOT NULL DEFAULT 7",
         [ID, V, N, col("w", "int(11)", False, 7)])


def test_add_column_with_default_rows_before_and_after(tmp_path):
    up = seeded(tmp_path)
    b = (Batch().c("t", id=3, v="c", n=3)                     # before the DDL: old shape
         .s("t", rec("ALTER", *ADD_W))
         .c("t", id=4, v="d", n=4, w=9).u("t", {"id": 1, "v": "a", "n": 1, "w": 7},
                                          id=1, v="a", n=1, w=5))
    up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t") == (["id", "v", "n", "w"], [
        (1, "a", 1, 5), (2, "b", 2, 7), (3, "c", 3, 7), (4, "d", 4, 9)])
    assert delta_types(tmp_path, "t")["w"] == 'PrimitiveType("integer")'


def test_replayed_batch_applies_the_ddl_once(tmp_path):
    up = seeded(tmp_path)
    b = (Batch().c("t", id=3, v="c", n=3).s("t", rec("ALTER", *ADD_W))
         .c("t", id=4, v="d", n=4, w=9))
    up.upsert_arrow(b.arrow(), 1)
    v = version(tmp_path, "t")
    expected = delta(tmp_path, "t")
    upserter(tmp_path).upsert_arrow(b.arrow(), 1)        # Spark replays after a crash
    assert version(tmp_path, "t") == v and delta(tmp_path, "t") == expected


def test_crash_between_the_rewrite_and_the_merge(tmp_path, monkeypatch):
    """The rewrite is recorded (<app_id>#ddl), the merge is not: the replay merges once and does
    not add the column again (a second ADD COLUMN would fill w=7 over the merged 9)."""
    up = seeded(tmp_path)
    b = (Batch().c("t", id=3, v="c", n=3).s("t", rec("ALTER", *ADD_W))
         .u("t", {"id": 2, "v": "b", "n": 2, "w": 7}, id=2, v="b", n=2, w=9))

    def crash(*a, **k):
        raise RuntimeError("killed")
    monkeypatch.setattr(DeltaUpserter, "_merge", crash)
    with pytest.raises(RuntimeError):
        up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t") == (["id", "v", "n", "w"], [(1, "a", 1, 7), (2, "b", 2, 7)])
    monkeypatch.undo()
    upserter(tmp_path).upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1, 7), (2, "b", 2, 9), (3, "c", 3, 7)]
    ops = [h["operation"] for h in deltalake.DeltaTable(str(tmp_path / DB / "t")).history()]
    assert ops[-1] == "WRITE"                          # the seed: the table created by an append
    assert ops[:-1].count("WRITE") == 1                # and one rewrite


def test_drop_rename_and_widen_in_one_batch(tmp_path):
    up = seeded(tmp_path)
    b = (Batch().u("t", {"id": 1, "v": "a", "n": 1}, id=1, v="a2", n=10)
         .s("t", rec("ALTER", "ALTER TABLE t MODIFY n bigint", [ID, V, col("n", "bigint(20)")]))
         .c("t", id=3, v="c", n=2**40)
         .s("t", rec("ALTER", "ALTER TABLE t RENAME COLUMN v TO label",
                     [ID, col("label", "varchar(20)"), col("n", "bigint(20)")],
                     renamed_columns={"v": "label"}))
         .u("t", {"id": 2, "label": "b", "n": 2}, id=2, label="b2", n=20)
         .s("t", rec("ALTER", "ALTER TABLE t DROP COLUMN n", [ID, col("label", "varchar(20)")]))
         .c("t", id=4, label="d"))
    up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t") == (["id", "label"],
                                    [(1, "a2"), (2, "b2"), (3, "c"), (4, "d")])
    # widening kept the values (checked on a table that keeps n)
    up2 = seeded(tmp_path / "w")
    up2.upsert_arrow(Batch().s("t", rec("ALTER", "ALTER TABLE t MODIFY n bigint",
                                        [ID, V, col("n", "bigint(20)")]))
                     .c("t", id=3, v="c", n=2**40).arrow(), 1)
    assert delta(tmp_path / "w", "t")[1] == [(1, "a", 1), (2, "b", 2), (3, "c", 2**40)]
    assert delta_types(tmp_path / "w", "t")["n"] == 'PrimitiveType("long")'


def test_decimal_precision_up_and_int_to_decimal(tmp_path):
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().s("t", rec("ALTER", "ALTER TABLE t MODIFY n decimal(12,2)",
                                       [ID, V, col("n", "decimal(12,2)")]))
                    .c("t", id=3, v="c", n=Decimal("1.25")).arrow(), 1)
    assert delta(tmp_path, "t")[1] == [(1, "a", Decimal("1.00")), (2, "b", Decimal("2.00")),
                                       (3, "c", Decimal("1.25"))]


def test_primary_key_change_moves_the_merge_key(tmp_path):
    up = seeded(tmp_path)
    code = col("code", "varchar(10)", False)
    b = (Batch().s("t", rec("ALTER", "ALTER TABLE t ADD code varchar(10) NOT NULL",
                            [ID, V, N, code]))
         .s("t", rec("ALTER", "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, code)",
                     [ID, V, N, code], pk=("id", "code")))
         .c("t", id=1, v="second", n=0, code="x"))      # same id, another key: a new row
    up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1, ""), (1, "second", 0, "x"), (2, "b", 2, "")]


def test_rename_table_moves_the_delta_table(tmp_path):
    up = seeded(tmp_path)
    b = (Batch().c("t", id=3, v="c", n=3)
         .s("t2", rec("RENAME", "RENAME TABLE t TO t2", [ID, V, N], renamed_from=f"{DB}.t"))
         .d("t2", id=1, v="a", n=1))
    up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t2")[1] == [(2, "b", 2), (3, "c", 3)]
    assert delta(tmp_path, "t")[1] == []               # the old path: kept, rows deleted
    v = (version(tmp_path, "t"), version(tmp_path, "t2"))
    upserter(tmp_path).upsert_arrow(b.arrow(), 1)        # replay
    assert (version(tmp_path, "t"), version(tmp_path, "t2")) == v
    assert delta(tmp_path, "t2")[1] == [(2, "b", 2), (3, "c", 3)]


def test_swap_two_tables_by_rename(tmp_path):
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().c("u", id=9, v="u9", n=9).arrow(False), 1)
    b = (Batch().s("tmp", rec("RENAME", "RENAME TABLE t TO tmp, u TO t, tmp TO u", [ID, V, N],
                              renamed_from=f"{DB}.t"))
         .s("t", rec("RENAME", "(same)", [ID, V, N], renamed_from=f"{DB}.u"))
         .s("u", rec("RENAME", "(same)", [ID, V, N], renamed_from=f"{DB}.tmp"))
         .c("t", id=10, v="u10", n=10))
    up.upsert_arrow(b.arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(9, "u9", 9), (10, "u10", 10)]
    assert delta(tmp_path, "u")[1] == [(1, "a", 1), (2, "b", 2)]


def test_drop_table_deletes_the_rows_and_keeps_the_table(tmp_path):
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().c("t", id=3, v="c", n=3).s("t", rec("DROP", "DROP TABLE t", None))
                    .arrow(), 1)
    assert delta(tmp_path, "t") == (["id", "v", "n"], [])


def test_drop_and_recreate_with_another_shape(tmp_path):
    up = seeded(tmp_path)
    new = [col("id", "bigint(20)", False), col("name", "varchar(30)")]
    b = (Batch().c("t", id=3, v="c", n=3).s("t", rec("DROP", "DROP TABLE t", None))
         .s("t", rec("CREATE", "CREATE TABLE t (id bigint primary key, name varchar(30))", new))
         .c("t", id=1, name="new"))
    up.upsert_arrow(b.arrow(), 1)
    assert delta(tmp_path, "t") == (["id", "name"], [(1, "new")])
    assert delta_types(tmp_path, "t")["id"] == 'PrimitiveType("long")'


def test_create_makes_an_empty_table(tmp_path):
    up = upserter(tmp_path)
    up.upsert_arrow(Batch().s("fresh", rec("CREATE", "CREATE TABLE fresh (...)", [ID, V]))
                    .arrow(), 0)
    assert delta(tmp_path, "fresh") == (["id", "v"], [])


def test_schema_changes_without_their_column_are_named_not_taken_for_rows(tmp_path):
    """A foreachBatch that selected the row columns and left schema_change out: its CREATE
    TABLE records are not row changes missing an image (binlog_row_image has nothing to do
    with it); the error names the column to pass, and nothing is written."""
    up = upserter(tmp_path)
    b = (Batch().s("fresh", rec("CREATE", "CREATE TABLE fresh (...)", [ID, V]))
         .c("fresh", id=1, v="a"))
    with pytest.raises(ConfigurationError) as e:
        up.upsert_arrow(b.arrow(with_schema_change=False), 0)
    msg = str(e.value)
    assert "schema_change" in msg and "shop.fresh" in msg and "op s" in msg, msg
    assert "binlog_row_image" not in msg and "after image" not in msg, msg
    assert not (tmp_path / DB / "fresh").exists()


def test_expression_default_stops_before_anything_is_written(tmp_path):
    up = seeded(tmp_path)
    v = version(tmp_path, "t")
    b = (Batch().c("t", id=3, v="c", n=3).s("t", rec(
        "ALTER", "ALTER TABLE t ADD ts datetime DEFAULT CURRENT_TIMESTAMP",
        [ID, V, N, col("ts", "datetime", True, None, True)])))
    with pytest.raises(SchemaError, match=r"shop\.t.*CURRENT_TIMESTAMP.*signalTable"):
        up.upsert_arrow(b.arrow(), 1)
    assert version(tmp_path, "t") == v
    assert delta(tmp_path, "t")[1] == [(1, "a", 1), (2, "b", 2)]


def test_a_change_the_values_cannot_take_stops_before_anything_is_written(tmp_path):
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().u("t", {"id": 1}, id=1, v="abc", n=1).arrow(False), 1)
    v = version(tmp_path, "t")
    with pytest.raises(SchemaError, match=r"column v from string to int32"):
        up.upsert_arrow(Batch().s("t", rec("ALTER", "ALTER TABLE t MODIFY v int",
                                           [ID, col("v", "int(11)"), N])).arrow(), 2)
    assert version(tmp_path, "t") == v


def test_a_batch_without_records_is_unchanged(tmp_path):
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().c("t", id=3, v="c", n=3).arrow(True), 1)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1), (2, "b", 2), (3, "c", 3)]


def test_a_restarted_upserter_reads_the_shape_the_ddl_left_not_todays_server(tmp_path):
    """The server has moved on (an extra column x the stream has not reached): a new upserter
    takes t's shape from the Delta table's column metadata, not from the server."""
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().s("t", rec("ALTER", *ADD_W)).arrow(), 1)
    later = TableInfo(START.columns + [_col(3, "w", T.LONG), _col(4, "x", T.LONG)], ["id"])
    fresh = DeltaUpserter(str(tmp_path), app_id="app", columns=lambda db, table: later)
    fresh.upsert_arrow(Batch().c("t", id=5, v="e", n=5, w=50).arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1, 7), (2, "b", 2, 7), (5, "e", 5, 50)]
    # without includeSchemaChanges the server's shape is used, as before: x is not in the image
    with pytest.raises(SchemaError, match="lacks column x"):
        DeltaUpserter(str(tmp_path), app_id="app", columns=lambda db, table: later).upsert_arrow(
            Batch().c("t", id=6, v="f", n=6, w=60).arrow(False), 3)


def test_a_key_change_alone_is_kept_in_the_column_metadata(tmp_path):
    """DROP/ADD PRIMARY KEY changes no Delta column: no rewrite, the key is recorded in the
    columns' metadata, and a restarted upserter merges on the new key."""
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().s("t", rec("ALTER", "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY "
                                       "KEY (id, n)", [ID, V, col("n", "int(11)", False)],
                                       pk=("id", "n"))).arrow(), 1)
    ops = [h["operation"] for h in deltalake.DeltaTable(str(tmp_path / DB / "t")).history()]
    assert ops[-1] == "WRITE" and "WRITE" not in ops[:-1]     # (the seed's append) no rewrite
    upserter(tmp_path).upsert_arrow(Batch().c("t", id=1, v="other", n=99).arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1), (1, "other", 99), (2, "b", 2)]


def test_typed_images_before_a_ddl(tmp_path):
    """Typed mode (structs of the query's table shape): rows before an ADD COLUMN are converted
    like JSON images."""
    up = seeded(tmp_path)
    image = pa.struct([("id", pa.int32()), ("v", pa.string()), ("n", pa.int32())])
    t = pa.table({
        "op": ["c", "s", "d"], "db": [DB] * 3, "table": ["t"] * 3,
        "before": pa.array([None, None, {"id": 2, "v": "b", "n": 2}], image),
        "after": pa.array([{"id": 3, "v": "c", "n": 3}, None, None], image),
        "seq": ["0000000001:000000000010:0000000000", "0000000001:000000000020:0000000000",
                "0000000001:000000000030:0000000000"],
        "schema_change": [None, rec("ALTER", *ADD_W), None]})
    up.upsert_arrow(t, 1)
    assert delta(tmp_path, "t")[1] == [(1, "a", 1, 7), (3, "c", 3, 7)]


def test_crash_in_the_middle_of_a_swap(tmp_path, monkeypatch):
    """RENAME TABLE t TO tmp, u TO t, tmp TO u killed after the first of the two rewrites: the
    replay reads the already rewritten table as it was before the batch (Delta time travel), so
    each table still ends up with the other's rows."""
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().c("u", id=9, v="u9", n=9).arrow(False), 1)
    b = (Batch().s("tmp", rec("RENAME", "RENAME TABLE t TO tmp, u TO t, tmp TO u", [ID, V, N],
                              renamed_from=f"{DB}.t"))
         .s("t", rec("RENAME", "(same)", [ID, V, N], renamed_from=f"{DB}.u"))
         .s("u", rec("RENAME", "(same)", [ID, V, N], renamed_from=f"{DB}.tmp")))
    real = deltalake.write_deltalake
    calls = []

    def second_dies(*a, **k):
        calls.append(a[0])
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real(*a, **k)
    monkeypatch.setattr(deltalake, "write_deltalake", second_dies)
    with pytest.raises(RuntimeError):
        up.upsert_arrow(b.arrow(), 2)
    monkeypatch.undo()
    assert len(calls) == 2
    upserter(tmp_path).upsert_arrow(b.arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(9, "u9", 9)]
    assert delta(tmp_path, "u")[1] == [(1, "a", 1), (2, "b", 2)]


def test_rename_of_a_table_whose_shape_the_source_does_not_know(tmp_path):
    """A RENAME record without columns (the source's history was unsure of the table): the Delta
    table moves as it is."""
    up = seeded(tmp_path)
    unsure = json.dumps({"type": "RENAME", "ddl": "RENAME TABLE t TO t3", "renamed_from":
                         f"{DB}.t", "renamed_columns": {}, "columns": None, "primary_key": [],
                         "unsure": True})
    up.upsert_arrow(Batch().c("t", id=3, v="c", n=3).s("t3", unsure).arrow(), 1)
    assert delta(tmp_path, "t3") == (["id", "v", "n"], [(1, "a", 1), (2, "b", 2), (3, "c", 3)])
    assert delta(tmp_path, "t")[1] == []
    with pytest.raises(SchemaError, match="has no column list"):
        up.upsert_arrow(Batch().s("t3", json.dumps({
            "type": "ALTER", "ddl": "ALTER TABLE t3 ADD x INT", "renamed_from": None,
            "renamed_columns": {}, "columns": None, "primary_key": [], "unsure": True})).arrow(), 2)


def test_a_change_before_the_ddl_that_the_new_type_cannot_hold_stops_first(tmp_path):
    """An update before MODIFY v INT in the same batch carries v='abc': stop before the rewrite
    (the Delta table's own values would convert)."""
    up = seeded(tmp_path)
    up.upsert_arrow(Batch().u("t", {"id": 1}, id=1, v="12", n=1)
                    .u("t", {"id": 2}, id=2, v="-3", n=2).arrow(False), 1)
    v = version(tmp_path, "t")
    b = (Batch().u("t", {"id": 1}, id=1, v="abc", n=1)
         .s("t", rec("ALTER", "ALTER TABLE t MODIFY v int", [ID, col("v", "int(11)"), N])))
    with pytest.raises(SchemaError, match=r"has v = 'abc'.*nothing was written"):
        up.upsert_arrow(b.arrow(), 2)
    assert version(tmp_path, "t") == v
    good = (Batch().u("t", {"id": 1}, id=1, v="7", n=1)
            .s("t", rec("ALTER", "ALTER TABLE t MODIFY v int", [ID, col("v", "int(11)"), N])))
    up.upsert_arrow(good.arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(1, 7, 1), (2, -3, 2)]


def test_rename_into_another_database(tmp_path):
    """RENAME TABLE shop.t TO archive.t_old: the rows before the rename (labelled shop.t) land in
    archive's Delta table."""
    up = seeded(tmp_path)
    b = Batch().c("t", id=3, v="c", n=3)
    b.rows.append(("s", "archive", "t_old", None, None, "0000000001:000000000150:0000000000",
                   rec("RENAME", "RENAME TABLE shop.t TO archive.t_old", [ID, V, N],
                       renamed_from=f"{DB}.t")))
    up.upsert_arrow(b.arrow(), 1)
    data = deltalake.DeltaTable(str(tmp_path / "archive" / "t_old")).to_pyarrow_table()
    assert sorted(data.column("id").to_pylist()) == [1, 2, 3]
    assert delta(tmp_path, "t")[1] == []
