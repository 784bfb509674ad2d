"""Typed mode's DECIMAL, DATETIME, TIMESTAMP and DATE values in Arrow's integer form.

The compiled row decoder gives them as ints (the unscaled DECIMAL, microseconds, days:
``cdc.rows.decode.decode_image_columns``' ``int_form``) and the batch builder makes their
Arrow columns from buffers (``streaming.source.arrow_values.int_form_array``). On a real
MariaDB binlog of extremes (pre-1970 and year 1/9999 times, negative and maximal DECIMALs, every
fractional precision, zero and invalid dates, NULLs; inserts, updates and deletes, MINIMAL
images): the typed batches hold the server's ``SELECT``, with either row decoder, and the
integer forms equal ``pa.array`` of the objects the decoder gives otherwise.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.binlog.events import RowsEvent  # noqa: E402
from cdc.binlog.files import read_events  # noqa: E402
from cdc.binlog.transactions import TableFilter, assemble  # noqa: E402
from streaming.contract.envelope import UPSERT_FIELDS  # noqa: E402
from streaming.contract.spark_schema import spark_column, typed_schema, with_fields  # noqa: E402
from streaming.source.arrow_values import has_int_form, int_form_array, to_int_form  # noqa: E402
from streaming.source.batches import BatchBuilder, record_batches  # noqa: E402

DB = "t_int_form"
UTC = dt.timezone.utc

COLUMNS = """id INT PRIMARY KEY, d1 DECIMAL(1,1), d18 DECIMAL(18,4), d180 DECIMAL(18,0),
 d9 DECIMAL(9,9), d20 DECIMAL(20,2), dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
 ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, dd DATE"""
ROWS = [
    "1, 0.9, 99999999999999.9999, 999999999999999999, 0.999999999, 123456789012345678.91, "
    "'9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999', "
    "'2038-01-19 03:14:07', '2038-01-19 03:14:07.999999', '9999-12-31'",
    "2, -0.9, -99999999999999.9999, -999999999999999999, -0.000000001, -1.05, "
    "'0001-01-01 00:00:00', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.999999', "
    "'1970-01-01 00:00:01', '1970-01-01 00:00:00.000001', '0001-01-01'",
    "3, 0, 0, 0, 0, 0, '0000-00-00 00:00:00', '2024-00-10 10:00:00.5', "
    "'1970-01-01 00:00:00', '0000-00-00 00:00:00', '2000-02-29 12:00:00.5', '0000-00-00'",
    "4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
]


@pytest.fixture(scope="module")
def changes(mariadb, tmp_path_factory):
    """(binlog files, the server's rows after each statement: [{id: row dict}])."""
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=DB)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00', sql_mode = ''")
            cur.execute(f"CREATE TABLE t ({COLUMNS})")
            cur.execute("INSERT INTO t VALUES " + ", ".join(f"({r})" for r in ROWS))
            cur.execute("INSERT INTO t (id, d18, dt6, ts6, dd) SELECT seq + 10, seq * -1.0625, "
                        "'1960-03-01 00:00:00.25' + INTERVAL seq * 97 DAY, "
                        "'1999-12-31 23:00:00.5' + INTERVAL seq MINUTE, "
                        "'1600-01-01' + INTERVAL seq * 3001 DAY FROM seq_1_to_300")
            cur.execute("UPDATE t SET d18 = d18 + 1, dt6 = dt6 - INTERVAL 1 YEAR, "
                        "dd = dd + INTERVAL 1 DAY WHERE id IN (1, 2, 20, 21)")
            cur.execute("DELETE FROM t WHERE id IN (3, 22)")
            cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
            cur.execute("UPDATE t SET d180 = -5, ts0 = '1980-01-01 00:00:00' WHERE id = 23")
            cur.execute("SET SESSION binlog_row_image = 'FULL'")
            # a table whose d18 is an INT (a union of typed streams maps columns by name), and
            # one whose primary key has integer forms (the key's JSON is built from values)
            cur.execute("CREATE TABLE u (id INT PRIMARY KEY, d18 INT)")
            cur.execute("INSERT INTO u VALUES (1, 7), (2, -12345), (3, NULL)")
            cur.execute("CREATE TABLE k (dd DATE, dc DECIMAL(10,2), ts TIMESTAMP(3) NULL, "
                        "v INT, PRIMARY KEY (dd, dc, ts))")
            cur.execute("INSERT INTO k VALUES ('1950-06-01', -3.5, '2001-01-01 00:00:00.125', "
                        "1), ('2024-02-29', 12345678.99, '2038-01-19 03:14:07.999', 2)")
            cur.execute("UPDATE k SET dc = dc + 1, v = v + 10")
            cur.execute("DELETE FROM k WHERE v = 11")
            final = {}
            for table in ("t", "u"):
                cur.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cur.description]
                final[table] = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    finally:
        conn.close()
    files = mariadb.snapshot_binlogs(tmp_path_factory.mktemp("int_form"), since_file=start_file)
    mariadb.execute(f"DROP DATABASE {DB}")
    return files, final


def _transactions(files, *tables):
    return [tx for tx in assemble(read_events(files), TableFilter(
        [f"{DB}.{t}" for t in tables or ("t",)], [])) if tx.rows_events]


def _columns(files, table="t"):
    return next(ev.table.columns for ev in read_events(files) if isinstance(ev, RowsEvent)
                and ev.table is not None and ev.table.table == table)


def _server_value(v, spark_type: str):
    """The typed value of the server's SELECT value: TIMESTAMP in UTC, zero dates NULL."""
    if isinstance(v, str):          # pymysql: a zero or invalid date, which typed mode nulls
        return None
    if spark_type == "timestamp" and v is not None:
        return v.replace(tzinfo=UTC)
    return v


@pytest.mark.parametrize("row_decoder", ["c", "python"], indirect=True)
@pytest.mark.parametrize("fields", [UPSERT_FIELDS, None])
def test_typed_batches_hold_the_servers_select(changes, row_decoder, fields):
    """The last after image per key (the stream replayed) is the server's row, value for
    value; with the key's JSON built (all fields) and without it."""
    files, final = changes
    final = final["t"]
    cols = _columns(files)
    schema = typed_schema(cols)
    if fields is not None:
        schema = with_fields(schema, fields)
    builder = BatchBuilder(schema, cols, table=f"{DB}.t")
    table = pa.Table.from_batches(list(record_batches(_transactions(files), builder, 100)))
    rows: dict = {}
    partial = 0
    for op, before, after in zip(*(table.column(c).to_pylist() for c in ("op", "before",
                                                                           "after"))):
        if op == "d":
            rows.pop(before["id"])
        elif after["id"] is None:       # a MINIMAL after image: the changed columns only
            partial += 1
            rows[before["id"]].update((k, v) for k, v in after.items() if v is not None)
        else:
            rows[after["id"]] = after
    types = {c.name: spark_column(c).spark.typeName() for c in cols}
    want = {k: {n: _server_value(v, types[n]) for n, v in r.items()} for k, r in final.items()}
    assert partial == 1 and rows[23]["d180"] == Decimal(-5) and \
        rows[23]["ts0"] == dt.datetime(1980, 1, 1, tzinfo=UTC)
    assert rows == want
    if fields is None:
        assert "key" in table.column_names and table.column("key").null_count == 0


@pytest.mark.parametrize("row_decoder", ["c"], indirect=True)
def test_int_forms_equal_arrow_of_the_decoded_values(changes, row_decoder):
    """Per column with an integer form: the C decoder's ints (and the objects it leaves to the
    Python decoder) as :func:`int_form_array` builds them equal ``pa.array`` of the values the
    decoder gives without the integer form."""
    files, _ = changes
    cols = _columns(files)
    types = [f.type for f in BatchBuilder(typed_schema(cols), cols).image_fields]
    formed = frozenset(i for i, t in enumerate(types) if has_int_form(t))
    assert {cols[i].name for i in formed} == {"d1", "d18", "d180", "d9", "dt0", "dt3", "dt6",
                                              "ts0", "ts6", "dd"}
    ints = objects = 0
    for tx in _transactions(files):
        for ev in tx.rows_events:
            update = ev.kind == "update"
            plain = [[] for _ in cols]
            plain_after = [[] for _ in cols] if update else None
            ev.decode_columns(plain, plain_after)
            got = [[] for _ in cols]
            got_after = [[] for _ in cols] if update else None
            ev.decode_columns(got, got_after, formed)
            for a, b in ((plain, got), (plain_after, got_after)) if update else ((plain, got),):
                for i in sorted(formed):
                    conv = spark_column(cols[i]).convert
                    want = [v if conv is None or v is None else conv(v) for v in a[i]
                            if v is not _absent()]
                    vals = [v for v in b[i] if v is not _absent()]
                    ints += sum(type(v) is int for v in vals)
                    objects += sum(v is not None and type(v) is not int for v in vals)
                    to = to_int_form(types[i])
                    vals = [None if v is None or conv is not None and conv(v) is None
                            else v if type(v) is int else to(v) for v in vals]
                    assert int_form_array(vals, types[i]).equals(pa.array(want, types[i])), \
                        cols[i].name
    # the data has both: integer forms, and values the native code leaves to Python (zero dates)
    assert ints > 1000 and objects > 0


def _absent():
    from cdc.values.types import ABSENT
    return ABSENT


def test_a_column_of_another_type_keeps_its_values(changes):
    """A typed stream of t over t and u (columns by name): u's INT d18 in t's DECIMAL(18,4)
    field is the server's number, not read as an unscaled DECIMAL."""
    files, final = changes
    cols = _columns(files)
    builder = BatchBuilder(with_fields(typed_schema(cols), UPSERT_FIELDS), cols, table=f"{DB}.t")
    table = pa.Table.from_batches(list(record_batches(_transactions(files, "t", "u"), builder)))
    got = {a["id"]: a["d18"] for tb, a in zip(table.column("table").to_pylist(),
                                                table.column("after").to_pylist()) if tb == "u"}
    want = {k: None if r["d18"] is None else Decimal(r["d18"]) for k, r in final["u"].items()}
    assert got == want and want[2] == Decimal(-12345)


def test_the_keys_json_of_integer_form_key_columns(changes):
    """A typed stream of k, whose primary key is a DATE, a DECIMAL and a TIMESTAMP: the key's
    JSON of every change is what RowChange.key() renders, and the images the server's."""
    from cdc.values.render import to_json_text
    files, _ = changes
    cols = _columns(files, "k")
    builder = BatchBuilder(typed_schema(cols), cols, table=f"{DB}.k")
    txs = _transactions(files, "k")
    want = [to_json_text(ch.key()) for tx in txs for ch in tx.changes()]
    table = pa.Table.from_batches(list(record_batches(_transactions(files, "k"), builder)))
    assert table.column("key").to_pylist() == want and len(want) == 5
    assert table.column("after").to_pylist()[2:4] == [   # the updates
        {"dd": dt.date(1950, 6, 1), "dc": Decimal("-2.50"),
         "ts": dt.datetime(2001, 1, 1, 0, 0, 0, 125000, tzinfo=UTC), "v": 11},
        {"dd": dt.date(2024, 2, 29), "dc": Decimal("12345679.99"),
         "ts": dt.datetime(2038, 1, 19, 3, 14, 7, 999000, tzinfo=UTC), "v": 12}]
