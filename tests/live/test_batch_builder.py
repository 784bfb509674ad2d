"""streaming.source.batches.BatchBuilder (columnar, per rows event, generated JSON renderers) gives the
same Arrow batches as the straightforward construction, one RowChange at a time, on real binlogs
of the harness's MariaDB: many column types, NULLs, zero dates, inserts/updates/deletes, a table
without primary key, a composite key in non-column order, MINIMAL and NOBLOB images (ABSENT
columns) and multi-table transactions; in JSON and in typed mode, with both row decoders.
A few literal texts pin the JSON mapping itself (so both sides cannot be wrong together)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.values.kinds import JSON_NULL  # noqa: E402
from cdc.values.types import ABSENT, ColumnDef, Geometry, InvalidTemporal  # noqa: E402
from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.errors import SchemaError  # noqa: E402
from cdc.binlog.events import RowsEvent  # noqa: E402
from cdc.binlog.files import read_events  # noqa: E402
from cdc.values.render import (compile_json_pair_renderer, compile_json_renderer, row_json,  # noqa: E402
                        to_json_text)
from cdc.binlog.transactions import TableFilter, assemble  # noqa: E402
from streaming.contract import envelope as offsets  # noqa: E402
from streaming.source.batches import BatchBuilder, record_batches  # noqa: E402
from streaming.contract.spark_schema import JSON_SCHEMA, spark_column, typed_schema, with_fields  # noqa: E402

pytestmark = pytest.mark.servers

DB = "t_batch_builder"
UTC = dt.timezone.utc

ALL_COLUMNS = """
 id BIGINT PRIMARY KEY, bu BIGINT UNSIGNED, i INT, iu INT UNSIGNED, ti TINYINT,
 tu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, y YEAR,
 dc DECIMAL(12,2), dcs DECIMAL(12,10), dcb DECIMAL(50,10),
 dt6 DATETIME(6), dt0 DATETIME, ts3 TIMESTAMP(3) NULL, dd DATE, tm TIME(3),
 vc VARCHAR(60) CHARACTER SET utf8mb4, ch CHAR(4) CHARACTER SET utf8mb4,
 vl VARCHAR(10) CHARACTER SET latin1, vb VARBINARY(20), bl BLOB, tx TEXT,
 e ENUM('a','b c'), s SET('x','y','z'), b10 BIT(10), b64 BIT(64), f FLOAT, d DOUBLE, j JSON
"""
N_ALL = len([c for c in ALL_COLUMNS.replace("\n", " ").split(", ") if c.strip()])

ALL_ROWS = [
    "1, 18446744073709551615, -2147483648, 4294967295, -128, 255, -32768, -8388608, 2155, "
    "-1234567890.12, 0.0000000012, -1234567890123456789012345678901234567890.0123456789, "
    "'2024-02-29 23:59:59.999999', '2024-02-29 23:59:59', '2038-01-19 03:14:07.999', "
    "'2024-02-29', '-838:59:59.999', 'q\"b\\\\é😀\\n\\t', 'ab', 'ÿé', x'00ff22', x'0102', "
    "'text', 'b c', 'x,z', b'1010101010', 18446744073709551615, -1.5, "
    "1.7976931348623157e308, '{\"a\": [1, 2.5]}'",
    "2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '2024-00-10 10:00:00.5', '0000-00-00 00:00:00', "
    "'0000-00-00 00:00:00', '0000-00-00', '00:00:00', '', '', '', x'', x'', '', 'a', '', b'0', "
    "0, 0, -0.0, '[]'",
    "3" + ", NULL" * (N_ALL - 1),
]


def _setup(conn) -> None:
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        cur.execute(f"CREATE TABLE t_all ({ALL_COLUMNS})")
        cur.execute("CREATE TABLE nopk (a INT, b VARCHAR(10), c DATETIME(3))")
        cur.execute("CREATE TABLE cpk (a INT, b VARCHAR(5), c DATE, PRIMARY KEY (c, a))")
        cur.execute("CREATE TABLE lit (id INT PRIMARY KEY, d DECIMAL(6,2), dt DATETIME(6), "
                    "ts TIMESTAMP NULL, s VARCHAR(20) CHARACTER SET utf8mb4, b VARBINARY(4), "
                    "f DOUBLE, z DATE, t TIME(1), n INT)")
        cur.execute("INSERT INTO t_all VALUES " + ", ".join(f"({r})" for r in ALL_ROWS))
        # many rows in one event
        cur.execute("INSERT INTO t_all (id, i, dc, dcs, dt6, ts3, vc, vb, d, e) VALUES " + ", ".join(
            f"({k}, {k * 7 - 500}, {-k}.{k % 100:02d}, 0.{k:010d}, "
            f"'2024-01-01 00:00:{k % 60:02d}.{k:06d}', '2001-01-01 00:00:0{k % 10}.5', "
            f"'r{k}é', x'{k:04x}', {k}.25, '{'a' if k % 2 else 'b c'}')" for k in range(10, 300)))
        cur.execute("UPDATE t_all SET dc = dc + 1, vc = CONCAT(vc, '!') WHERE id >= 10")
        cur.execute("UPDATE t_all SET i = 5, dt6 = '2001-02-03 04:05:06.7' WHERE id <= 3")
        cur.execute("DELETE FROM t_all WHERE id % 7 = 0")
        cur.execute("INSERT INTO nopk VALUES (1, 'one', '2020-01-01 00:00:00.5'), "
                    "(NULL, NULL, NULL), (3, 'thr\"ee', '0000-00-00 00:00:00')")
        cur.execute("UPDATE nopk SET b = 'x' WHERE a = 1")
        cur.execute("DELETE FROM nopk WHERE a = 3")
        cur.execute("INSERT INTO cpk VALUES (1, 'a', '2020-01-01'), (2, 'b', '2021-01-01')")
        cur.execute("INSERT INTO lit VALUES (7, -1.50, '2024-02-29 23:59:59.000001', "
                    "'2024-01-01 00:00:00', 'a\"b\\\\c é', x'00ff', 0.1, '0000-00-00', "
                    "'-01:02:03.5', NULL)")
        cur.execute("UPDATE lit SET n = 1")
    # one transaction over several tables
    conn.begin()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_all (id, vc, dt6) VALUES (500, 'tx', '2020-02-02 02:02:02')")
        cur.execute("INSERT INTO nopk (a, b) VALUES (50, 'tx')")
        cur.execute("UPDATE cpk SET b = 'z' WHERE a = 1")
        cur.execute("DELETE FROM t_all WHERE id = 11")
        cur.execute("UPDATE t_all SET vc = 'again' WHERE id = 500")
    conn.commit()
    with conn.cursor() as cur:   # images without every column: ABSENT values
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cur.execute("UPDATE t_all SET vc = 'min', d = 2.5 WHERE id IN (1, 2, 12, 13)")
        cur.execute("DELETE FROM t_all WHERE id = 15")
        cur.execute("INSERT INTO t_all (id, vc) VALUES (1000, 'minimal')")
        cur.execute("UPDATE nopk SET b = 'mm' WHERE a = 1")
        cur.execute("UPDATE cpk SET b = 'q'")
        cur.execute("SET SESSION binlog_row_image = 'NOBLOB'")
        cur.execute("UPDATE t_all SET i = i + 1 WHERE id IN (1, 16)")
        cur.execute("SET SESSION binlog_row_image = 'FULL'")


@pytest.fixture(scope="module")
def binlogs(mariadb, tmp_path_factory):
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=DB)
    try:
        _setup(conn)
    finally:
        conn.close()
    mariadb.execute(f"DROP DATABASE {DB}")
    return mariadb.snapshot_binlogs(tmp_path_factory.mktemp("batch_builder"),
                                    since_file=start_file)


def _transactions(files, include=f"{DB}.*", exclude=()):
    """Freshly parsed (the decoder under test decodes them) committed transactions with rows."""
    return [tx for tx in assemble(read_events(files), TableFilter([include], exclude))
            if tx.rows_events]


def _typed_columns(files, table="t_all"):
    return next(ev.table.columns for ev in read_events(files) if isinstance(ev, RowsEvent)
                and ev.table is not None and ev.table.qualified_name == f"{DB}.{table}")


# --- the reference: one RowChange at a time ------------------------------------------------------


def _reference(transactions, typed_columns=None) -> dict[str, list]:
    """Every column of the envelope as Python values, built per RowChange as the builder did
    before it went columnar; typed images are lists of converted values (None: no image)."""
    names = ["op", "db", "table", "before", "after", "key", "ts_ms", "server_id", "file", "pos",
             "gtid", "row", "xid", "seq"]
    out = {n: [] for n in names}
    if typed_columns is not None:
        typed_names = [c.name for c in typed_columns]
        converters = [spark_column(c).convert for c in typed_columns]

    def image(change, values):
        if values is None:
            return None
        columns = change.columns
        if typed_columns is None:
            return row_json(columns, values, change.table_map.columns)
        where = {n: i for i, n in enumerate(columns)}
        vals = [None if where.get(n) is None or values[where[n]] is ABSENT else values[where[n]]
                for n in typed_names]
        return [v if v is None or conv is None else conv(v) for v, conv in zip(vals, converters)]

    for tx in transactions:
        ts = tx.timestamp * 1000 if tx.timestamp is not None else None
        for ch in tx.changes():
            k = ch.key()
            for name, value in (("op", ch.op), ("db", ch.schema), ("table", ch.table),
                                ("before", image(ch, ch.before)),
                                ("after", image(ch, ch.after)),
                                ("key", None if k is None else to_json_text(k)), ("ts_ms", ts),
                                ("server_id", tx.server_id), ("file", tx.file), ("pos", tx.pos),
                                ("gtid", tx.gtid), ("row", ch.index), ("xid", tx.xid),
                                ("seq", offsets.seq(tx.file, tx.pos, ch.index))):
                out[name].append(value)
    return out


def _batch_sizes(transactions, rows_per_batch):
    """The batch sizes record_batches must give: whole rows events, flushed at the limit (a
    transaction may span batches)."""
    sizes, n = [], 0
    for tx in transactions:
        for ev in tx.rows_events:
            n += len(ev.decode_rows())
            if n >= rows_per_batch:
                sizes.append(n)
                n = 0
    return sizes + ([n] if n else [])


def _column(batches, name):
    if name in ("server_id", "file", "pos", "gtid", "row", "xid"):
        arrays = [b.column("source").field(name) for b in batches]
    else:
        arrays = [b.column(name) for b in batches]
    return pa.chunked_array(arrays).combine_chunks()


def _assert_same(batches, ref, builder, typed):
    assert all(b.schema == builder.arrow_schema for b in batches)
    image_type = builder.arrow_schema.field("after").type
    for name, expected in ref.items():
        got = _column(batches, name)
        if typed and name in ("before", "after"):
            want = pa.array([None if v is None else dict(zip(image_type.names, v)) for v in expected],
                            type=image_type)
            if not got.equals(want):
                bad = next(i for i, (g, w) in enumerate(zip(got.to_pylist(), want.to_pylist()))
                           if g != w)
                pytest.fail(f"{name} differs first at row {bad}: {got[bad]} != {want[bad]}")
        else:
            values = got.to_pylist()
            assert len(values) == len(expected), name
            for i, (g, w) in enumerate(zip(values, expected)):
                assert g == w and type(g) is type(w), f"{name} row {i}: {g!r} != {w!r}"


def _kinds(transactions):
    """(kind, full before/after?) of every rows event: what the data must cover."""
    seen = set()
    for tx in transactions:
        for ev in tx.rows_events:
            n = len(ev.table.columns)
            seen.add((ev.table.table, ev.kind, len(ev.present) == n,
                      ev.present_after is None or len(ev.present_after) == n))
    return seen


# --- the builder against the reference ------------------------------------------------------------


@pytest.mark.server
@pytest.mark.parametrize("row_decoder", ["c", "python"], indirect=True)
@pytest.mark.parametrize("rows_per_batch", [8192, 7])
def test_json_batches_equal_reference(binlogs, row_decoder, rows_per_batch):
    txs = _transactions(binlogs)
    kinds = _kinds(txs)
    # the data covers what it must: full and partial images, each kind, several tables
    assert {("t_all", "insert", True, True), ("t_all", "update", True, True),
            ("t_all", "delete", True, True), ("t_all", "update", False, False),
            ("t_all", "delete", False, True), ("nopk", "update", True, True),
            ("cpk", "update", True, True)} <= kinds, kinds
    assert any(len({ev.table.table for ev in tx.rows_events}) >= 3 for tx in txs)
    ref = _reference(txs)
    builder = BatchBuilder(JSON_SCHEMA)
    batches = list(record_batches(_transactions(binlogs), builder, rows_per_batch))
    assert [b.num_rows for b in batches] == _batch_sizes(txs, rows_per_batch)
    _assert_same(batches, ref, builder, typed=False)
    # what the reference holds is not trivial: keys of all three kinds, absent columns left out
    assert None in ref["key"] and '{"c": "2020-01-01", "a": 1}' in ref["key"]
    assert '{"vc": "min", "d": 2.5}' in ref["after"] and '{"id": 12}' in ref["before"]


@pytest.mark.server
@pytest.mark.parametrize("row_decoder", ["c", "python"], indirect=True)
@pytest.mark.parametrize("include", [f"{DB}.t_all", f"{DB}.*"])
@pytest.mark.parametrize("rows_per_batch, chunk_rows", [(100, None), (8192, 3)])
def test_typed_batches_equal_reference(binlogs, row_decoder, include, rows_per_batch,
                                       chunk_rows):
    """Typed images of t_all; with every table, the other tables' columns map by name (lit is
    left out: its DECIMAL column d does not fit t_all's DOUBLE d). Small batches, and large
    ones whose values go to Arrow in many small chunks."""
    cols = _typed_columns(binlogs)
    exclude = [f"{DB}.lit"]
    txs = _transactions(binlogs, include, exclude)
    ref = _reference(txs, cols)
    builder = BatchBuilder(typed_schema(cols), cols)
    if chunk_rows is not None:
        builder._chunk_rows = chunk_rows
    batches = list(record_batches(_transactions(binlogs, include, exclude), builder,
                                  rows_per_batch))
    assert [b.num_rows for b in batches] == _batch_sizes(txs, rows_per_batch)
    assert len(batches) > 1 or chunk_rows is not None
    _assert_same(batches, ref, builder, typed=True)


@pytest.mark.server
@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("fields", [("op", "db", "table", "before", "after", "seq"),
                                    ("op", "key", "source"), ("op", "after", "ts_ms")])
def test_option_fields_builds_those_columns_of_the_full_envelope(binlogs, typed, fields):
    """A builder for an envelope narrowed by option fields gives exactly those columns of the
    full envelope's batches (the key JSON, computed only when delivered, included)."""
    cols = _typed_columns(binlogs) if typed else None
    include = f"{DB}.t_all" if typed else f"{DB}.*"
    full_schema = typed_schema(cols) if typed else JSON_SCHEMA
    narrow = with_fields(full_schema, fields)
    assert narrow.fieldNames() == list(fields)
    full = list(record_batches(_transactions(binlogs, include), BatchBuilder(full_schema, cols),
                               50))
    builder = BatchBuilder(narrow, cols)
    assert builder.with_key == ("key" in fields)
    part = list(record_batches(_transactions(binlogs, include), builder, 50))
    assert len(part) == len(full) > 1
    for f, p in zip(full, part):
        assert p.schema.names == [n for n in full_schema.fieldNames() if n in fields]
        assert p.equals(f.select(p.schema.names))


@pytest.mark.server
@pytest.mark.parametrize("row_decoder", ["c", "python"], indirect=True)
def test_counted_rows_equal_decoded_rows(binlogs, row_decoder):
    """Transaction.row_count (the driver's count, without building rows where it can) on every
    rows event of these binlogs: MINIMAL and NOBLOB images, every column type, updates."""
    txs = _transactions(binlogs)
    assert [tx.row_count() for tx in txs] == \
        [sum(len(ev.decode_rows()) for ev in tx.rows_events) for tx in txs]
    assert sum(tx.row_count() for tx in txs) > 300


@pytest.mark.server
@pytest.mark.parametrize("row_decoder", ["c", "python"], indirect=True)
def test_decoded_columns_equal_decoded_rows(binlogs, row_decoder):
    """RowsEvent.decode_columns (what typed mode builds from: the compiled decoder appends each
    value to its column's list, no row tuples) holds exactly decode_rows' values, column by
    column, on every rows event of these binlogs: every column type, NULLs, zero dates, MINIMAL
    and NOBLOB images (ABSENT where the image lacks the column), updates' two images; appended
    after what the lists held already."""
    events = [ev for tx in _transactions(binlogs) for ev in tx.rows_events]
    assert {ev.kind for ev in events} == {"insert", "update", "delete"}
    assert any(len(ev.present) < len(ev.table.columns) for ev in events)   # MINIMAL/NOBLOB
    for ev in events:
        rows = ev.decode_rows()
        update = ev.kind == "update"
        images = ([r[0] for r in rows], [r[1] for r in rows]) if update else (rows, None)
        out = [["x"] for _ in ev.table.columns]
        after = [["x"] for _ in ev.table.columns] if update else None
        assert ev.decode_columns(out, after) == len(rows)
        for got, image in zip((out, after), images):
            if image is None:
                continue
            want = [["x"] + list(c) for c in zip(*image)]
            assert got == want
            # the same objects' types (Decimal stays Decimal, ABSENT stays ABSENT)
            assert [[type(v) for v in c] for c in got] == [[type(v) for v in c] for c in want]


@pytest.mark.server
def test_literal_json_and_typed_values(binlogs):
    """The mapping itself, written out: exact decimals, ISO dates, Z for TIMESTAMP, escapes,
    base64, zero dates as text, TIME with a fraction, null."""
    txs = _transactions(binlogs, f"{DB}.lit")
    assert len(txs) == 2
    [insert] = list(record_batches(txs[:1], BatchBuilder(JSON_SCHEMA))).pop().to_pylist()
    after = ('{"id": 7, "d": -1.50, "dt": "2024-02-29T23:59:59.000001", '
             '"ts": "2024-01-01T00:00:00Z", "s": "a\\"b\\\\c é", "b": "AP8=", "f": 0.1, '
             '"z": "0000-00-00", "t": "-01:02:03.500000", "n": null}')
    assert insert["op"] == "c" and insert["db"] == DB and insert["table"] == "lit"
    assert insert["before"] is None
    assert insert["after"] == after
    assert insert["key"] == '{"id": 7}'
    tx = txs[0]
    number = int(str(tx.file).rsplit(".", 1)[1])
    assert insert["seq"] == "%010d:%012d:0000000000" % (number, tx.pos)
    assert insert["source"] == {"server_id": tx.server_id, "file": tx.file, "pos": tx.pos,
                                "gtid": tx.gtid, "row": 0, "xid": tx.xid}
    assert insert["ts_ms"] == tx.timestamp * 1000
    [update] = list(record_batches(txs[1:], BatchBuilder(JSON_SCHEMA))).pop().to_pylist()
    assert (update["op"], update["before"]) == ("u", after)
    assert update["after"] == after.replace('"n": null', '"n": 1')

    cols = _typed_columns(binlogs, "lit")
    [typed] = list(record_batches(txs[:1], BatchBuilder(typed_schema(cols), cols))).pop() \
        .to_pylist()
    assert typed["before"] is None
    assert typed["after"] == {
        "id": 7, "d": Decimal("-1.50"), "dt": dt.datetime(2024, 2, 29, 23, 59, 59, 1),
        "ts": dt.datetime(2024, 1, 1, tzinfo=UTC), "s": 'a"b\\c é', "b": b"\x00\xff",
        "f": 0.1, "z": None, "t": -dt.timedelta(hours=1, minutes=2, seconds=3.5), "n": None}
    assert typed["key"] == '{"id": 7}'


@pytest.mark.server
def test_minimal_update_key_comes_from_the_before_image(binlogs):
    """binlog_row_image=MINIMAL logs an update's after image without the unchanged key: the
    key column is the before image's value, not ABSENT."""
    txs = _transactions(binlogs, f"{DB}.t_all")
    rows = [r for b in record_batches(txs, BatchBuilder(JSON_SCHEMA)) for r in b.to_pylist()]
    minimal = [r for r in rows if r["op"] == "u" and r["after"].startswith('{"vc": "min"')]
    assert [r["after"] for r in minimal] == ['{"vc": "min", "d": 2.5}'] * 4
    assert [r["key"] for r in minimal] == ['{"id": 1}', '{"id": 2}', '{"id": 12}', '{"id": 13}']
    changes = [ch for tx in txs for ch in tx.changes()
               if ch.op == "u" and ch.after[ch.columns.index("id")] is ABSENT]
    assert [ch.key() for ch in changes] == [{"id": 1}, {"id": 2}, {"id": 12}, {"id": 13}]


@pytest.mark.server
def test_typed_values_that_do_not_fit_raise_schema_error(binlogs):
    cols = _typed_columns(binlogs)
    narrow = []
    for c in cols:   # column i claimed TINYINT: its INT values overflow the byte field
        if c.name == "i":
            c = ColumnDef(c.index, T.TINY, None, True)
            c.name = "i"
        narrow.append(c)
    for chunk_rows in (None, 2):    # raised when a chunk or the batch goes to Arrow
        builder = BatchBuilder(typed_schema(narrow), narrow)
        if chunk_rows is not None:
            builder._chunk_rows = chunk_rows
        with pytest.raises(SchemaError, match="typed mode: values of column i do not fit"):
            list(record_batches(_transactions(binlogs, f"{DB}.t_all"), builder))


# --- the generated renderers on values the server never sends ------------------------------------

_POOL = {
    T.LONG: [1, -5, None, True, 2 ** 63, ABSENT],
    T.VARCHAR: ["a", 'q"\\\n\x01é😀', b"\x00\xff", InvalidTemporal("0000"), None],
    T.NEWDECIMAL: [Decimal("1.50"), Decimal("-0.00"), Decimal("1E-9"), Decimal("0.0000012"),
                   Decimal("NaN"), Decimal("-Infinity"), Decimal("1E+3"), None, 5],
    T.DATETIME2: [dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(2024, 1, 2),
                  InvalidTemporal("0000-00-00 00:00:00"), dt.datetime(2024, 1, 2, tzinfo=UTC),
                  None],
    T.TIMESTAMP2: [dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
                   dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))),
                   dt.datetime(2024, 1, 2), None, InvalidTemporal("0")],
    T.DATE: [dt.date(2024, 1, 2), InvalidTemporal("0000-00-00"), None, dt.datetime(2024, 1, 1)],
    T.TIME2: [dt.timedelta(hours=-838, microseconds=5), dt.timedelta(0), None],
    T.DOUBLE: [1.5, float("inf"), float("-inf"), float("nan"), -0.0, 1e300, 5e-324, None, 3],
    T.BLOB: [b"", b"abc\x00", "text", None],
    T.JSON: [{"a": [1, 2.5, None]}, None, "s", [], JSON_NULL, dt.datetime(2024, 1, 2),
             [dt.date(2024, 1, 2), dt.timedelta(seconds=-1), Decimal("1.50"), 1e300]],
    T.GEOMETRY: [Geometry(4326, b"\x01"), None],
    T.BIT: [0, 1023, None],
    T.ENUM: ["a", "", 1, None],
}


def test_generated_renderers_match_row_json_on_odd_values():
    """Every fast branch falls back to to_json_text for what it does not handle exactly:
    NaN/inf, decimals with an exponent, aware datetimes in DATETIME, non-UTC TIMESTAMPs,
    subclasses (bool, InvalidTemporal), bytes in text columns, names needing escapes."""
    types = list(_POOL)
    cols = []
    for i, t in enumerate(types):
        cols.append(ColumnDef(i, t, None, True))
    names = ["id", 'na"me\\', "d%s", "dt", "ts", "date", "tm", "dbl", "bl", "j", "g", "b", "é"]
    rnd = random.Random(7)
    pool = {t: [v for v in vals if v is not ABSENT] for t, vals in _POOL.items()}
    rows = [tuple(rnd.choice(pool[t]) for t in types) for _ in range(3000)]
    assert compile_json_renderer(cols, names)(rows) == [row_json(names, r, cols) for r in rows]
    pairs = [(r, tuple(v if rnd.random() < 0.5 else rnd.choice(pool[t])
                       for v, t in zip(r, types))) for r in rows]
    before, after = compile_json_pair_renderer(cols, names)(pairs)
    assert before == [row_json(names, b, cols) for b, _ in pairs]
    assert after == [row_json(names, a, cols) for _, a in pairs]
    for pk in ([0], [3, 0], [12, 2, 1]):
        keys = compile_json_renderer(cols, names, pk)(rows)
        assert keys == [to_json_text({names[i]: r[i] for i in pk}) for r in rows]
    # a key naming one column twice: a dict keeps one entry
    assert compile_json_renderer(cols, names, [0, 0])(rows[:1]) == \
        [to_json_text({names[0]: rows[0][0]})]
    # the literal texts of a few of these values
    one = (True, 'q"\\\n', Decimal("1E-9"), dt.datetime(2024, 1, 2, tzinfo=UTC),
           dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))), None,
           dt.timedelta(hours=-838, microseconds=5), float("nan"), b"abc\x00",
           {"a": [1, 2.5, None]}, Geometry(4326, b"\x01"), 1023, 1)
    assert compile_json_renderer(cols, names)([one]) == [
        '{"id": true, "na\\"me\\\\": "q\\"\\\\\\n", "d%s": 0.000000001, '
        '"dt": "2024-01-02T00:00:00Z", "ts": "2024-01-01T22:00:00Z", "date": null, '
        '"tm": "-837:59:59.999995", "dbl": null, "bl": "YWJjAA==", "j": {"a": [1, 2.5, null]}, '
        '"g": {"srid": 4326, "wkb": "AQ=="}, "b": 1023, "é": 1}']
