"""The flat (AutoCDC-ready) layout: :mod:`streaming.contract.flat` on Arrow record batches of the typed
envelope, built by the real :class:`streaming.source.batches.BatchBuilder` from synthetic transactions."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.errors import ConfigurationError, SchemaError  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from cdc.rows.decode import append_columns  # noqa: E402
from streaming.source.batches import BatchBuilder  # noqa: E402
from streaming.contract.flat import META_COLUMNS, flat_schema, flatten, flatten_batches  # noqa: E402
from streaming.source.options import SourceOptions  # noqa: E402
from streaming.contract.spark_schema import typed_schema  # noqa: E402


def col(i, name, type_code, meta=None, pk=False, nullable=True):
    c = ColumnDef(i, type_code, meta, nullable)
    c.name = name
    c.primary_key = pk
    if type_code == T.VARCHAR:
        c.collation = 45          # utf8mb4_general_ci
    return c


COLUMNS = [col(0, "id", T.LONG, pk=True, nullable=False), col(1, "name", T.VARCHAR, 40),
           col(2, "price", T.NEWDECIMAL, (10, 2))]
NAMES = [c.name for c in COLUMNS]


class _TMap:
    """Just what BatchBuilder reads of a table map."""

    def __init__(self, columns, pk=(0,)):
        self.columns = columns
        self.column_names = [c.name for c in columns]
        self.primary_key = list(pk)
        self.schema, self.table = "shop", "items"
        self.full_row_reader = object()


TMAP = _TMap(COLUMNS)


def rows_event(kind, rows):
    return SimpleNamespace(kind=kind, table=TMAP, decode_rows=lambda: rows,
                           decode_columns=lambda out, after=None: append_columns(
                               rows, kind == "update", out, after),
                           present=list(range(3)), present_after=list(range(3)), partial=False)


def tx(*events, pos=1000):
    return SimpleNamespace(file="mysql-bin.000007", pos=pos, gtid="0-1-5", xid=9, server_id=1,
                           timestamp=1_700_000_000, tables_by_name={("shop", "items"): TMAP},
                           rows_events=list(events))


def envelope_batch(*transactions):
    b = BatchBuilder(typed_schema(COLUMNS), COLUMNS)
    for t in transactions:
        b.add_transaction(t)
    return b.flush()


def records(batch):
    return batch.to_pylist()


def test_flat_schema_puts_table_columns_first_then_cdc_metadata():
    s = flat_schema(COLUMNS)
    assert s.fieldNames()[:3] == NAMES
    assert s.fieldNames()[3:] == list(META_COLUMNS)
    assert s["_cdc_seq"].dataType.simpleString() == "string"
    assert s["_cdc_ts_ms"].dataType.simpleString() == "bigint"
    assert s["price"].dataType.simpleString() == "decimal(10,2)"


def test_table_column_named_like_metadata_is_an_error():
    cols = COLUMNS + [col(3, "_cdc_op", T.VARCHAR, 4)]
    with pytest.raises(SchemaError, match="_cdc_op"):
        flat_schema(cols)


def test_insert_update_delete_become_rows_of_the_table():
    batch = envelope_batch(
        tx(rows_event("insert", [(1, "a", Decimal("1.50")), (2, "b", None)]), pos=100),
        tx(rows_event("update", [((1, "a", Decimal("1.50")), (1, "A", Decimal("2.00")))]),
           pos=200),
        tx(rows_event("delete", [(2, "b", None)]), pos=300))
    out = flatten(batch, ["id"])
    assert out.schema.names == NAMES + list(META_COLUMNS)
    got = [(r["_cdc_op"], r["id"], r["name"], r["price"]) for r in records(out)]
    assert got == [("c", 1, "a", Decimal("1.50")), ("c", 2, "b", None),
                   ("u", 1, "A", Decimal("2.00")),
                   ("d", 2, "b", None)]             # a delete carries the before image
    seqs = [r["_cdc_seq"] for r in records(out)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    env = records(batch)
    assert seqs == [e["seq"] + ":0" for e in env]
    r0 = records(out)[0]
    assert (r0["_cdc_db"], r0["_cdc_table"], r0["_cdc_ts_ms"]) == \
        ("shop", "items", 1_700_000_000_000)
    assert r0["_cdc_source"]["file"] == "mysql-bin.000007" and r0["_cdc_source"]["pos"] == 100


def test_primary_key_change_is_a_delete_of_the_old_key_then_an_upsert_of_the_new():
    batch = envelope_batch(
        tx(rows_event("update", [((1, "a", None), (1, "b", None)),      # same key
                                 ((2, "x", None), (20, "x", None)),     # key change
                                 ((3, "y", None), (3, "z", None))]), pos=500))
    out = records(flatten(batch, ["id"]))
    got = [(r["_cdc_op"], r["id"], r["name"]) for r in out]
    assert got == [("u", 1, "b"), ("d", 2, "x"), ("u", 20, "x"), ("u", 3, "z")]
    seq = [r["_cdc_seq"] for r in out]
    assert seq == sorted(seq), "the old key's delete sorts before the new key's upsert"
    env = [e["seq"] for e in records(batch)]
    assert seq == [env[0] + ":0", env[1] + ":0", env[1] + ":1", env[2] + ":0"]


def test_without_a_primary_key_nothing_is_split():
    batch = envelope_batch(tx(rows_event("update", [((2, "x", None), (20, "x", None))])))
    out = records(flatten(batch, []))
    assert [(r["_cdc_op"], r["id"]) for r in out] == [("u", 20)]


def test_snapshot_rows_are_upserts_with_op_r():
    batch = envelope_batch(tx(rows_event("read", [(5, "s", Decimal("0.10"))])))
    out = records(flatten(batch, ["id"]))
    assert [(r["_cdc_op"], r["id"], r["name"], r["price"]) for r in out] == \
        [("r", 5, "s", Decimal("0.10"))]


def test_flatten_batches_takes_the_key_from_the_columns():
    b1 = envelope_batch(tx(rows_event("update", [((2, "x", None), (3, "x", None))])))
    out = [records(b) for b in flatten_batches(iter([b1]), COLUMNS)]
    assert [(r["_cdc_op"], r["id"]) for r in out[0]] == [("d", 2), ("u", 3)]
    # the batches match the Spark schema Spark is told about
    from streaming._compat import to_arrow_schema
    assert list(flatten_batches(iter([b1]), COLUMNS))[0].schema == \
        to_arrow_schema(flat_schema(COLUMNS), timezone="UTC")


def test_option_layout():
    base = {"host": "h", "user": "u"}
    assert SourceOptions.parse(base).layout == "envelope"
    assert SourceOptions.parse({**base, "table": "db.t", "layout": "FLAT"}).layout == "flat"
    with pytest.raises(ConfigurationError, match="layout=flat needs option table"):
        SourceOptions.parse({**base, "layout": "flat"})
    with pytest.raises(ConfigurationError, match="envelope or flat"):
        SourceOptions.parse({**base, "table": "db.t", "layout": "wide"})


def test_auto_cdc_flows_argument_errors_before_any_connection():
    from streaming.apps.pipelines import auto_cdc_flows
    with pytest.raises(ConfigurationError, match="scd_type must be 1 or 2"):
        auto_cdc_flows(None, "shop.*", scd_type=3, host="127.0.0.1", user="u")
    from streaming._compat import VERSION
    if VERSION < (4, 2):
        pytest.skip("before 4.2 the PySpark is refused next, before the other arguments: "
                    "tests/live/test_pipelines.py::test_auto_cdc_flows_names_the_pyspark_it_needs")
    with pytest.raises(ConfigurationError, match="option table is set per table"):
        auto_cdc_flows(None, "shop.*", host="127.0.0.1", user="u", table="shop.t")
    with pytest.raises(ConfigurationError, match="option layout is set per table"):
        auto_cdc_flows(None, "shop.*", host="127.0.0.1", user="u", layout="flat")
    with pytest.raises(ConfigurationError, match="needs option host"):
        auto_cdc_flows(None, "shop.*", user="u")
