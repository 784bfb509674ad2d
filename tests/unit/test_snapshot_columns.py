"""The snapshot's column-by-column JSON images (:mod:`streaming.source.snapshot_columns`) are the
texts of the row path (``row_converter`` -> ``compile_json_renderer``) for the server's text of
edge values, and the Arrow fast form is really taken for the common types (the live type matrix
counterpart: tests/live/test_snapshot_values_live.py::test_columnar_json_images_equal_row_json).
"""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.snapshot.values import row_converter  # noqa: E402
from cdc.values.render import compile_json_renderer  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from streaming.source import snapshot_columns as sc  # noqa: E402

UTF8MB4, LATIN1, BINARY = 45, 8, 63


def col(type_code, meta=None, *, name="c", unsigned=False, collation=None, enum=None):
    c = ColumnDef(0, type_code, meta, True)
    c.name, c.unsigned, c.collation, c.enum_values = name, unsigned, collation, enum
    return c


# (column, the server's texts of a batch, whether the Arrow fast form takes the batch)
CASES = [
    (col(T.LONG), [b"1", b"-2147483648", None, b"0"], True),
    (col(T.LONG), [b"007", b"0000"], True),                  # ZEROFILL: the number
    (col(T.LONGLONG, unsigned=True), [b"18446744073709551615", b"0"], True),
    (col(T.LONGLONG), [b"-9223372036854775808", b"9223372036854775807"], True),
    (col(T.YEAR), [b"0000", b"2024", b"1901"], True),
    # the text is the JSON text (no round trip) unless ZEROFILL zeros or -0 say otherwise
    (col(T.LONG), [b"0", None, b"-7", b"10"], True),
    (col(T.TINY, unsigned=True), [b"0", b"255", None], True),
    (col(T.LONG, unsigned=True), [b"0", None, b"5"], True),               # INT(1) ZEROFILL
    (col(T.LONG, unsigned=True), [b"12345", None, b"0042"], True),        # INT(4) ZEROFILL
    (col(T.LONG), [b"-0", b"1"], True),
    (col(T.SHORT), [None, None], True),
    (col(T.NEWDECIMAL, (12, 2)), [b"123.45", b"-0.50", b"0.00", None, b"-99.00"], True),
    (col(T.NEWDECIMAL, (10, 0)), [b"12", b"-3", b"0"], True),
    (col(T.NEWDECIMAL, (10, 2)), [b"00000012.50", b"0.00"], False),  # ZEROFILL
    (col(T.DATETIME2, 3), [b"2024-01-02 03:04:05.120", b"2024-01-02 03:04:05.000",
                           b"1000-01-01 00:00:00.001", None], True),
    (col(T.DATETIME2, 0), [b"2024-02-29 23:59:59", b"9999-12-31 23:59:59"], True),
    (col(T.DATETIME2, 6), [b"2024-01-02 03:04:05.000001", b"2024-01-02 03:04:05.100000"], True),
    (col(T.DATETIME2, 1), [b"2024-01-02 03:04:05.5", b"2024-01-02 03:04:05.0"], True),
    (col(T.DATETIME2, 0), [b"0000-00-00 00:00:00", b"2024-01-02 03:04:05"], False),
    (col(T.DATETIME2, 2), [b"2024-02-30 10:00:00.50"], False),
    (col(T.DATETIME2, 0), [b"0000-01-01 00:00:00"], False),  # year 0: Python has none
    (col(T.TIMESTAMP2, 3), [b"2024-01-02 03:04:05.120", b"1970-01-01 00:00:01.000"], True),
    # every value with the same fraction digits, none zero: the padding is a literal
    (col(T.DATETIME2, 3), [b"2024-01-02 03:04:05.123", None, b"2024-01-02 03:04:05.001"], True),
    (col(T.DATETIME2, 3), [b"2024-01-02 03:04:05.120", b"2024-01-02 03:04:05.999"], True),
    (col(T.TIMESTAMP2, 6), [b"2024-01-02 03:04:05.123456", b"2038-01-19 03:14:07.000001"], True),
    (col(T.TIMESTAMP2, 0), [b"2024-01-02 03:04:05", None], True),
    (col(T.DATETIME2, 5), [b"2024-01-02 03:04:05.00001", b"2024-01-02 03:04:05.00000"], True),
    (col(T.TIMESTAMP2, 0), [b"0000-00-00 00:00:00"], False),
    (col(T.DATE), [b"2024-01-02", None, b"0001-01-01"], True),
    (col(T.DATE), [b"2024-00-10", b"2024-01-02"], False),
    (col(T.ENUM, enum=["a", 'q"uote', "é"]), [b"1", b"2", b"3", b"0", None], True),
    (col(T.ENUM, enum=["a"]), [b"1", b"2"], False),        # past the members: the number
    (col(T.VARCHAR, collation=UTF8MB4), [b"plain", "é😀".encode(), b"", None], True),
    (col(T.VARCHAR, collation=UTF8MB4), [b'q"uote', b"back\\slash", b"tab\t", b"\x01"], False),
    (col(T.VARCHAR, collation=UTF8MB4), [b"ok", b"\xed\xa0\x80"], False),    # a surrogate
    (col(T.VARCHAR, collation=UTF8MB4), [b"ok", b"\xc3"], False),
    (col(T.VARCHAR, collation=LATIN1), [b"caf\xe9"], False),
    (col(T.BLOB, collation=BINARY), [b"\x00\xff", b""], False),
    (col(T.DOUBLE), [b"1e300", b"0.1", b"-0"], False),
    (col(T.FLOAT), [b"0.1", b"3.40282e38"], False),
    (col(T.TIME2, 3), [b"-838:59:59.000", b"00:00:01.500"], False),
]


@pytest.mark.parametrize("column,texts,fast", CASES,
                         ids=[f"{i}-{c.real_type}" for i, (c, _, _) in enumerate(CASES)])
def test_fragments_equal_the_row_path(column, texts, fast):
    want = compile_json_renderer([column], ["c"])(
        list(map(row_converter([column]), [(t,) for t in texts])))
    got = sc.JsonImages([column], ["c"], None).images([(t,) for t in texts])[0].to_pylist()
    assert got == want
    raw = pa.array(texts, pa.binary())
    if fast:
        sc._fast_parts(column, raw)       # no _Slow: Arrow renders this batch
    else:
        with pytest.raises(sc._Slow):
            sc._fast_parts(column, raw)


def test_images_and_keys_of_a_table():
    cols = [col(T.LONGLONG, name="id"), col(T.NEWDECIMAL, (12, 2), name="amount"),
            col(T.VARCHAR, name='na"me', collation=UTF8MB4),
            col(T.DATETIME2, 3, name="at"), col(T.DOUBLE, name="d")]
    names = [c.name for c in cols]
    raw = [(b"%d" % i, b"%d.%02d" % (i, i % 100), ("n%d" % i).encode() if i % 3 else None,
            b"2024-01-02 03:04:05.%03d" % (i % 1000), b"%d.5" % i) for i in range(1, 300)]
    rows = list(map(row_converter(cols), raw))
    after, key = sc.JsonImages(cols, names, [2, 0]).images(raw)
    assert after.to_pylist() == compile_json_renderer(cols, names)(rows)
    assert key.to_pylist() == compile_json_renderer(cols, names, [2, 0])(rows)
    assert sc.JsonImages([], [], None).images([(), ()])[0].to_pylist() == ["{}", "{}"]


def _table_columns():
    cols = [col(T.LONGLONG, name="id"), col(T.LONG, name="i"),
            col(T.LONGLONG, name="u", unsigned=True), col(T.TINY, name="t", unsigned=True),
            col(T.YEAR, name="y"), col(T.NEWDECIMAL, (12, 2), name="amount"),
            col(T.NEWDECIMAL, (65, 30), name="wide"),
            col(T.ENUM, (T.ENUM, 1), name="st", enum=["new", "paid", "shipped"]),
            col(T.VARCHAR, 400, name="note", collation=UTF8MB4),
            col(T.VARCHAR, 20, name="l1", collation=LATIN1),
            col(T.BLOB, 2, name="bin", collation=BINARY),
            col(T.DATETIME2, 3, name="at"), col(T.TIMESTAMP2, 0, name="ts"),
            col(T.DATE, name="d"), col(T.DOUBLE, name="dbl"), col(T.FLOAT, name="fl"),
            col(T.TIME2, 0, name="tm")]
    for i, c in enumerate(cols):
        c.index = i
    return cols


def _raw_rows(n: int, odd: bool):
    out = []
    for i in range(1, n + 1):
        bad = odd and i % 50 == 7
        out.append((
            b"%d" % i, b"%d" % (i * 7 - 300) if i % 9 else None, b"18446744073709551615",
            b"255", b"0000" if i % 11 == 0 else b"2024",
            (b"000%d.50" if bad else b"%d.50") % i, b"-1.%030d" % i,
            b"%d" % (i % 3 + 1) if not bad else b"9",
            ('n"%d' % i if bad else "ü%d" % i).encode(), b"caf\xe9",
            bytes([i % 256, 0]),
            b"0000-00-00 00:00:00.000" if bad else b"2024-01-%02d 10:00:00.%03d" % (i % 28 + 1,
                                                                                    i % 1000),
            b"2024-03-01 00:00:%02d" % (i % 60), b"2024-02-30" if bad else b"2024-02-29",
            b"%d.25" % i, b"0.1", b"-12:00:%02d" % (i % 60)))
    return out


@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
@pytest.mark.parametrize("odd", [False, True], ids=["plain", "odd-values"])
def test_column_path_batches_equal_the_row_path(typed, odd):
    """Whole envelope batches (every field: op, key, seq, source, images) of the column path
    equal the row path's, several fetched batches, with and without values that take a
    column's exact path."""
    from tests.support.snapshot_paths import both_paths
    pytest.importorskip("pyspark")
    old, new = both_paths(_table_columns(), _raw_rows(700, odd), typed=typed,
                          rows_per_batch=256)
    assert old.num_rows == new.num_rows == 700
    assert old.schema == new.schema
    for name in old.column_names:
        assert old[name].combine_chunks().equals(new[name].combine_chunks()), name


def test_typed_fast_form_is_taken():
    """On plain values, every column of those types goes through Arrow compute (not the exact
    path), so the equality above is about the fast form."""
    pytest.importorskip("pyspark")
    from streaming._compat import to_arrow_type
    from streaming.contract.spark_schema import spark_column
    cols, raw = _table_columns(), _raw_rows(100, False)
    fast = {"id", "i", "u", "t", "y", "amount", "wide", "st", "note", "bin", "at", "ts", "d",
            "dbl"}
    for c, values in zip(cols, zip(*raw)):
        arrow = pa.array(values, pa.binary())
        typ = to_arrow_type(spark_column(c).spark, timezone="UTC")     # as the builder's
        if c.name in fast:
            sc._fast_typed(c, arrow, typ)
        else:
            with pytest.raises(sc._Slow):
                sc._fast_typed(c, arrow, typ)


@pytest.mark.parametrize("texts,canonical", [
    ([b"0", b"-1", b"10", None], True), ([b"18446744073709551615"], True), ([None], True),
    ([b"007"], False), ([b"0000"], False), ([b"1", b"00"], False), ([b"-0"], False)])
def test_integer_texts_pass_through_only_when_canonical(texts, canonical):
    text = pa.array(texts, pa.binary()).cast(pa.string())
    assert sc._canonical_integers(text) is canonical
    parts = sc._fast_parts(col(T.LONGLONG, unsigned=True) if b"18446744073709551615" in texts
                           else col(T.LONG), pa.array(texts, pa.binary()))
    assert parts.text.equals(text) is canonical     # else the numbers' own texts


def test_escape_check_reads_only_the_arrays_values():
    text = pa.array(['a"b', "plain", None, "é😀", "", "tab\t", "x\\"])
    assert [sc._needs_escape(text.slice(k, 1)) for k in range(len(text))] == \
        [True, False, False, False, False, True, True]
    assert not sc._needs_escape(text.slice(1, 4)) and sc._needs_escape(text.slice(1, 5))
    assert not sc._needs_escape(pa.array([None, None], pa.string()))
    assert all(sc._needs_escape(pa.array([chr(c)])) for c in list(range(32)) + [34, 92])
    assert not any(sc._needs_escape(pa.array([chr(c)])) for c in range(32, 0x800)
                   if c not in (34, 92))


@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
def test_column_path_batches_equal_the_row_path_without_the_key(typed):
    """With option fields leaving out ``key`` (DeltaUpserter's fields) the column path skips
    the key's JSON and builds the null before images its own way: still the row path's
    batches."""
    from streaming.contract.envelope import UPSERT_FIELDS
    from streaming.contract.spark_schema import JSON_SCHEMA, typed_schema, with_fields
    from tests.support.snapshot_paths import both_paths
    pytest.importorskip("pyspark")
    cols = _table_columns()
    schema = with_fields(typed_schema(cols) if typed else JSON_SCHEMA, UPSERT_FIELDS)
    assert "key" not in schema.fieldNames()
    old, new = both_paths(cols, _raw_rows(700, False), typed=typed, rows_per_batch=256,
                          schema=schema)
    assert old.num_rows == new.num_rows == 700
    assert old.schema == new.schema
    for name in old.column_names:
        assert old[name].combine_chunks().equals(new[name].combine_chunks()), name
