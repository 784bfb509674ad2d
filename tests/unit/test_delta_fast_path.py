"""DeltaUpserter's fast path (JSON images read by pyarrow's JSON reader, streaming.sinks.json_images)
gives exactly the last-change-per-key table of the per-value path, for random change sequences
(inserts, snapshot rows, updates that change the primary key, deletes) of a table with every kind
of column the reader reads (binary columns with every byte value, MySQL JSON documents with JSON
null against SQL NULL, GEOMETRY, empty values), and steps aside where it cannot read a value
exactly."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.values.kinds import JSON_NULL, Geometry  # noqa: E402
from cdc.values.render import row_json  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo  # noqa: E402
from streaming.sinks.json_images import NotFast  # noqa: E402

UTF8MB4 = 45
BINARY = 63


def _col(i, name, code, meta, collation=None, unsigned=False):
    c = ColumnDef(i, code, meta, True)
    c.name, c.collation, c.unsigned = name, collation, unsigned
    return c


COLUMNS = [_col(0, "id", T.LONGLONG, None), _col(1, "amount", T.NEWDECIMAL, (12, 2)),
           _col(2, "big", T.LONGLONG, None, unsigned=True),
           _col(3, "note", T.VARCHAR, 160, UTF8MB4), _col(4, "created", T.DATETIME2, 3),
           _col(5, "ts", T.TIMESTAMP2, 6), _col(6, "day", T.DATE, None),
           _col(7, "f", T.FLOAT, 4), _col(8, "d", T.DOUBLE, 8), _col(9, "tiny", T.TINY, None),
           _col(10, "blob", T.BLOB, 2, BINARY), _col(11, "vb", T.VARCHAR, 64, BINARY),
           _col(12, "bin", T.STRING, (T.STRING, 16), BINARY), _col(13, "doc", T.JSON, 4),
           _col(14, "geo", T.GEOMETRY, 4)]
NAMES = [c.name for c in COLUMNS]
EVERY_BYTE = bytes(range(256))
DOCUMENTS = [JSON_NULL, None, "", "s\"\\\n é😀", 0, -1, 2**63, 1.5, 1e300, -0.0, Decimal("1.50"),
             True, False, [], {}, [1, "a", None, [2.5, {"k": "v"}]],
             {"a": {"b": [None, True, 1e-300]}, "long key": "x" * 30, "": 0}]
GEOMETRIES = [None, Geometry(0, b""), Geometry(4326, EVERY_BYTE),
              Geometry(2**32 - 1, b"\x01\x01\x00\x00\x00" + bytes(16))]


def _row(rnd, key):
    return (key, Decimal(rnd.randrange(-10**11, 10**11)).scaleb(-2),
            rnd.choice([0, 2**64 - 1, rnd.randrange(2**64)]),
            rnd.choice(["", "é😀", 'q"\\\n', "x" * 40, None]),
            dt.datetime(2024, 1, 1, 0, 0, 1, 123000) + dt.timedelta(seconds=rnd.randrange(10**8)),
            dt.datetime(2020, 5, 6, 7, 8, 9, rnd.randrange(10**6), tzinfo=dt.timezone.utc),
            dt.date(1000, 1, 1) + dt.timedelta(days=rnd.randrange(3 * 10**5)),
            rnd.choice([1.100000023841858, -0.0, 3.4028234663852886e38, None]),
            rnd.choice([1e300, -2.5e-308, 0.1, None]), rnd.randrange(-128, 128),
            rnd.choice([None, b"", EVERY_BYTE, EVERY_BYTE[::-1] * 3, bytes(rnd.randrange(256)
                                                                          for _ in range(7))]),
            rnd.choice([None, b"", b"\x00", b"\xff\xfe", EVERY_BYTE[rnd.randrange(256):]]),
            rnd.choice([None, bytes(16)] + [EVERY_BYTE[i:i + 16] for i in range(0, 256, 16)]),
            rnd.choice(DOCUMENTS), rnd.choice(GEOMETRIES))


def _changes(seed: int, n: int) -> list:
    rnd = random.Random(seed)
    live: dict[int, tuple] = {}
    out = []
    for i in range(n):
        seq = "0000000001:%012d:%010d" % (i, 0)
        kind = rnd.random()
        if not live or kind < 0.35:
            k = rnd.randrange(50)
            row = _row(rnd, k)
            live[k] = row
            out.append((rnd.choice("cr"), None, row_json(NAMES, row, COLUMNS), seq))
        elif kind < 0.8:
            k = rnd.choice(list(live))
            old = live.pop(k)
            new_key = k if rnd.random() < 0.7 else rnd.randrange(50, 80)
            row = _row(rnd, new_key)
            live[new_key] = row
            out.append(("u", row_json(NAMES, old, COLUMNS), row_json(NAMES, row, COLUMNS), seq))
        else:
            k = rnd.choice(list(live))
            out.append(("d", row_json(NAMES, live.pop(k), COLUMNS), None, seq))
    return out


def _upserter():
    return DeltaUpserter("/nonexistent", app_id="t",
                         columns=lambda db, table: TableInfo(COLUMNS, ["id"]))


def _rows(table) -> list:
    return sorted(table.to_pylist(), key=lambda r: (r["id"], r["_cdc_op"]))


@pytest.mark.parametrize("seed", range(12))
def test_fast_path_equals_the_per_value_path(seed):
    up = _upserter()
    tbl = up._table("db", "t")
    assert tbl.read_schema is not None
    changes = _changes(seed, 400)
    fast = up._last_changes_fast(tbl, changes)
    tbl.read_schema = None                          # the per-value path
    slow = up._last_changes("db", "t", changes, False)
    assert fast.schema == slow.schema
    assert _rows(fast) == _rows(slow)


@pytest.mark.parametrize("image, why", [
    ('{"id": 1, "day": "0000-00-00"}', "zero date"),
    ('{"id": 1, "note": {"$binary": "ww=="}}', "text not valid in its charset"),
    ('{"id": 1, "note": 3}', "a number in a text column"),
    ('{"id": 1, "amount": 1.005}', "more decimals than the column"),
])
def test_values_the_reader_cannot_take_exactly_go_the_per_value_way(image, why):
    up = _upserter()
    tbl = up._table("db", "t")
    full = row_json(NAMES, _row(random.Random(1), 1))
    with pytest.raises(NotFast):
        up._last_changes_fast(tbl, [("c", None, full, "1"), ("u", full, image, "2")])


def test_binary_json_and_geometry_values_on_the_fast_path():
    """The values themselves, beside the per-value path's: every byte value, JSON null as the
    document ``null`` against SQL NULL, documents as MySQL prints them, GEOMETRY as the SRID's
    four little-endian bytes and the WKB."""
    import struct
    up = _upserter()
    tbl = up._table("db", "t")
    docs = [JSON_NULL, None, "", 0, {"a": [1, 2.5]}]
    changes = [("c", None, row_json(NAMES, _row(random.Random(k), k)[:10] + (
        EVERY_BYTE if k % 2 else b"", EVERY_BYTE[k:], None, docs[k], GEOMETRIES[k % 4]), COLUMNS),
        str(k)) for k in range(len(docs))]
    got = sorted(up._last_changes_fast(tbl, changes).to_pylist(), key=lambda r: r["id"])
    assert [r["blob"] for r in got] == [b"", EVERY_BYTE] * 2 + [b""]
    assert [r["vb"] for r in got] == [EVERY_BYTE[k:] for k in range(len(docs))]
    assert [r["bin"] for r in got] == [None] * len(docs)
    assert [r["doc"] for r in got] == ["null", None, '""', "0", '{"a": [1, 2.5]}']
    assert [r["geo"] for r in got] == [None, bytes(4), struct.pack("<I", 4326) + EVERY_BYTE,
                                       b"\xff" * 4 + b"\x01\x01" + bytes(19), None]
    tbl.read_schema = None
    assert got == sorted(up._last_changes("db", "t", changes, False).to_pylist(),
                         key=lambda r: r["id"])


@pytest.mark.parametrize("column, value, why", [
    ("blob", '"QQ=A"', "base64 padding inside a group"),
    ("blob", '"QQ==QQ=="', "base64 padding inside a text"),
    ("vb", '"QQ"', "base64 without its padding"),
    ("vb", '"Q Q="', "not a base64 character"),
    ("bin", '{"$binary": "QQ=="}', "an object in a binary column"),
    ("geo", '{"wkb": ""}', "a GEOMETRY without its SRID"),
    ("geo", '{"srid": -1, "wkb": ""}', "an SRID out of range"),
    ("geo", '"AAAA"', "a GEOMETRY as text"),
    ("doc", '1, "extra": 2', "a column the table lacks, beside a JSON column"),
])
def test_binary_json_and_geometry_values_the_fast_path_cannot_take(column, value, why):
    up = _upserter()
    tbl = up._table("db", "t")
    full = row_json(NAMES, _row(random.Random(1), 1)[:10] + (None,) * 5, COLUMNS)
    image = full.replace(f'"{column}": null', f'"{column}": {value}')
    assert image != full
    assert up._last_changes_fast(tbl, [("c", None, full, "1")]).num_rows == 1
    with pytest.raises(NotFast):
        up._last_changes_fast(tbl, [("c", None, full, "1"), ("u", full, image, "2")])


def test_an_image_without_every_column_is_not_fast():
    """MINIMAL after images leave columns out: nulls there would overwrite values."""
    up = _upserter()
    tbl = up._table("db", "t")
    with pytest.raises(NotFast):
        up._last_changes_fast(tbl, [("u", '{"id": 1}', '{"id": 1, "note": "x"}', "1")])
