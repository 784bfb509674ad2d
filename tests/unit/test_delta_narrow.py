"""A typed stream's schema names its table (streaming.contract.spark_schema.image_table), and
what DeltaUpserter collects of it narrowed -- no db/table per row, before images' keys only --
widens (streaming.sinks.delta.narrow.widen) into changes that upsert into the same Delta table
as the whole changes: snapshot rows, inserts, updates with and without a key change, deletes,
a two-column key that is not the first columns."""

from __future__ import annotations

from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from streaming.contract.spark_schema import (JSON_SCHEMA, image_table, typed_schema,  # noqa: E402
                                             with_fields)
from streaming.contract.envelope import UPSERT_FIELDS  # noqa: E402
from streaming.sinks.delta.narrow import widen  # noqa: E402
from streaming.sinks.delta.types import arrow_schema  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo  # noqa: E402

UTF8MB4 = 45


def _col(i, name, code, meta, collation=None):
    c = ColumnDef(i, code, meta, True)
    c.name, c.collation = name, collation
    return c


COLUMNS = [_col(0, "amount", T.NEWDECIMAL, (12, 2)), _col(1, "region", T.VARCHAR, 40, UTF8MB4),
           _col(2, "n", T.LONG, None), _col(3, "note", T.VARCHAR, 160, UTF8MB4)]
KEY = ["region", "n"]


def test_a_typed_schema_names_its_table():
    assert image_table(typed_schema(COLUMNS, ("shop", "orders"))) == ("shop", "orders")
    assert image_table(with_fields(typed_schema(COLUMNS, ("shop", "orders")),
                                   UPSERT_FIELDS)) == ("shop", "orders")
    assert image_table(typed_schema(COLUMNS)) is None
    assert image_table(JSON_SCHEMA) is None


def _changes() -> pa.Table:
    image = pa.struct(list(arrow_schema(COLUMNS)))

    def img(amount, region, n, note):
        return {"amount": Decimal(amount), "region": region, "n": n, "note": note}
    rows = [  # op, before, after
        ("r", None, img("1.00", "eu", 1, "a")), ("r", None, img("2.00", "eu", 2, None)),
        ("r", None, img("3.00", "us", 1, "c")), ("c", None, img("4.00", "as", 9, "d")),
        ("u", img("1.00", "eu", 1, "a"), img("1.50", "eu", 1, "a2")),
        ("u", img("2.00", "eu", 2, None), img("2.00", "as", 2, "moved")),
        ("d", img("3.00", "us", 1, "c"), None),
        ("u", img("4.00", "as", 9, "d"), img("4.00", "us", 1, "back")),
    ]
    ops, befores, afters = zip(*rows)
    return pa.table({"op": pa.array(ops), "db": pa.array(["shop"] * len(rows)),
                     "table": pa.array(["orders"] * len(rows)),
                     "before": pa.array(befores, image), "after": pa.array(afters, image),
                     "seq": pa.array([f"0000000001:000000000100:{i:010d}"
                                      for i in range(len(rows))])})


def _narrow(changes: pa.Table) -> pa.Table:
    """What narrow_columns selects, as Spark gives it."""
    names = [c.name for c in COLUMNS]
    before = changes.column("before").combine_chunks()
    out = {c: changes.column(c) for c in ("op", "after", "seq")}
    for k in KEY:
        out[f"_cdc_before_{names.index(k)}"] = before.field(names.index(k))
    out["_cdc_other_table"] = pa.array([False] * changes.num_rows)
    return pa.table(out)


def _upserted(tmp_path, name, changes) -> list:
    up = DeltaUpserter(str(tmp_path / name), app_id="t",
                       columns=lambda db, t: TableInfo(COLUMNS, KEY))
    up.upsert_arrow(changes.slice(0, 4), 0)             # a new table: created by an append
    up.upsert_arrow(changes.slice(4), 1)                # then a MERGE
    return DeltaTable(str(tmp_path / name / "shop" / "orders")).to_pyarrow_table() \
        .sort_by([(k, "ascending") for k in KEY]).to_pylist()


def test_the_narrow_collect_upserts_the_whole_changes_delta_table(tmp_path):
    changes = _changes()
    wide = widen(_narrow(changes), "shop", "orders")
    assert wide.schema.names == list(UPSERT_FIELDS)
    assert wide.column("db").to_pylist() == ["shop"] * changes.num_rows
    assert wide.column("before").is_valid().to_pylist() == [False] * 4 + [True] * 4
    want = _upserted(tmp_path, "whole", changes)
    assert _upserted(tmp_path, "narrow", wide) == want
    assert [(r["region"], r["n"], r["note"]) for r in want] == \
        [("as", 2, "moved"), ("eu", 1, "a2"), ("us", 1, "back")]
    # a row of another table: not narrowed (the caller collects the batch whole)
    other = _narrow(changes)
    other = other.set_column(other.schema.get_field_index("_cdc_other_table"), "_cdc_other_table",
                             pa.array([False] * (changes.num_rows - 1) + [True]))
    assert widen(other, "shop", "orders") is None


def test_schema_change_records_pass_through_the_narrow_collect():
    """includeSchemaChanges: ``schema_change`` is collected as it is, after the upsert fields
    (DeltaUpserter.columns_of's order); an ``s`` row has no before image."""
    changes = _changes()
    records = [None] * (changes.num_rows - 1) + ['{"type": "ALTER"}']
    ops = changes.column("op").to_pylist()[:-1] + ["s"]
    narrow = _narrow(changes)
    narrow = narrow.set_column(0, "op", pa.array(ops)).append_column("schema_change",
                                                                     pa.array(records))
    wide = widen(narrow, "shop", "orders")
    assert wide.schema.names == list(UPSERT_FIELDS) + ["schema_change"]
    assert wide.column("schema_change").to_pylist() == records
    assert wide.column("before").is_valid().to_pylist()[-1] is False
