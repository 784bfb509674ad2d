"""What one TABLE_MAP event may make the parser allocate (issue 13, item 12).

The column count of a TABLE_MAP is a length-encoded integer: a few bytes can claim 10^9
columns.  The column-type array has one byte per column, so a count larger than the bytes left
in the event is malformed (:class:`~cdc.errors.TruncatedEventError`); and MySQL and MariaDB
tables have at most 4096 columns, so a larger count -- which would otherwise build ~200 bytes of
per-column objects for each byte of the event (a 2 MB event: 400 MB) -- is refused with a
:class:`~cdc.errors.ParseError` before anything per column is built.  Both errors name the file
and position of the event.  A real 4096-column table map still decodes, with its rows.

Events are built byte-exact (tests/support/binlog_builder.py) and read through a file parser
and a stream parser, with each row decoder (the table map does not depend on it, the rows
after it do).
"""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, rows_v2_body,
                                    table_map_body)

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.constants import EventType
from cdc.binlog.parser import BinlogParser
from cdc.binlog.tablemap import MAX_COLUMNS, decode_table_map
from cdc.errors import ParseError, TruncatedEventError
from cdc.rows.backend import c_decoder_available

DECODERS = ["python"] + (["c"] if c_decoder_available() else [])
FILE = "mysql-bin.000042"
TABLE_MAP_POS = 4 + len(FDE_8020)     # where the TABLE_MAP starts in the files built below


def _head(count_bytes: bytes) -> bytes:
    """A TABLE_MAP body up to and including its column count."""
    return (b"\x5a\x00\x00\x00\x00\x00" + b"\x01\x00" + b"\x03app\x00" + b"\x01t\x00"
            + count_bytes)


def _claiming(count: int, tail: bytes = bytes([T.LONG]) * 8 + b"\x00" + b"\x00") -> bytes:
    return _head(lenenc(count)) + tail


def _real(ncols: int, type_code: int = T.LONG) -> bytes:
    """A well-formed TABLE_MAP body of *ncols* columns (no metadata, all nullable)."""
    return table_map_body(90, "app", "t", bytes([type_code]) * ncols, b"",
                          b"\xff" * ((ncols + 7) // 8))


def _file(body: bytes, *more: bytes) -> bytes:
    return binlog_file([FDE_8020, event(EventType.TABLE_MAP, body), *more])


def _read_file(data: bytes, decoder: str) -> list:
    parser = BinlogParser(file=FILE, row_decoder=decoder)
    parser.feed(data)
    return list(parser.events())


def _stream_event(body: bytes) -> bytes:
    """The TABLE_MAP as a replication connection delivers it (position from its log_pos)."""
    raw = bytearray(event(EventType.TABLE_MAP, body))
    raw[13:17] = struct.pack("<I", 5000 + len(raw))       # log_pos: the end of the event
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    return bytes(raw)


def _read_stream(raw: bytes, decoder: str) -> list:
    parser = BinlogParser(stream=True, file=FILE, row_decoder=decoder)
    return parser.feed_event(FDE_8020) + parser.feed_event(raw)


def _peak(fn, *args):
    """(what fn raised, peak bytes tracemalloc saw while it ran: the input is built before)."""
    tracemalloc.start()
    try:
        fn(*args)
    except ParseError as e:
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    pytest.fail("no ParseError")


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("count", [10 ** 9, 2 ** 64 - 1, 4097 * 1000, 0xFFFFFF])
def test_a_count_past_the_event_is_malformed_and_costs_nothing(decoder, count):
    e, peak = _peak(_read_file, _file(_claiming(count)), decoder)
    assert type(e) is TruncatedEventError
    assert str(e) == (f"TABLE_MAP of app.t claims {count} columns but only 10 bytes follow its "
                      f"column count (one type byte per column): the event is corrupt "
                      f"(at file {FILE}, position {TABLE_MAP_POS})")
    assert (e.file, e.position) == (FILE, TABLE_MAP_POS)
    assert peak < 256 << 10, f"{peak} bytes allocated"
    e, peak = _peak(_read_stream, _stream_event(_claiming(count)), decoder)
    assert type(e) is TruncatedEventError and (e.file, e.position) == (FILE, 5000)
    assert "claims" in str(e) and peak < 256 << 10


@pytest.mark.parametrize("decoder", DECODERS)
def test_more_columns_than_a_server_allows_is_refused_before_building_them(decoder):
    ncols = 1_000_000
    body = _real(ncols)             # well-formed: one type byte per column, a nullable bitmap
    e, peak = _peak(_read_file, _file(body), decoder)
    assert type(e) is ParseError
    assert str(e) == (
        f"TABLE_MAP of app.t has {ncols} columns; MySQL and MariaDB tables have at most "
        f"{MAX_COLUMNS}: the event is corrupt (or not from a MySQL/MariaDB server) "
        f"(at file {FILE}, position {TABLE_MAP_POS})")
    # The file's bytes (~1.1 MB, copied once into the parser) -- not ~200 MB of columns.
    assert peak < 3 * len(body), f"{peak} bytes allocated for a {len(body)}-byte event"
    e, peak = _peak(_read_stream, _stream_event(body), decoder)
    assert type(e) is ParseError and (e.file, e.position) == (FILE, 5000)
    assert peak < 3 * len(body)


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_limit_is_exact(decoder):
    e, _ = _peak(_read_file, _file(_real(MAX_COLUMNS + 1)), decoder)
    assert f"has {MAX_COLUMNS + 1} columns" in str(e)
    assert MAX_COLUMNS == 4096
    tmap = decode_table_map(_real(MAX_COLUMNS), 8)
    assert len(tmap.columns) == MAX_COLUMNS


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_4096_column_table_decodes_with_its_rows(decoder):
    ncols = MAX_COLUMNS
    row = b"\x00" * ((ncols + 7) // 8) + b"".join(struct.pack("<i", i * 7) for i in range(ncols))
    data = _file(_real(ncols), event(EventType.WRITE_ROWS, rows_v2_body(90, ncols, row)))
    tracemalloc.start()
    try:
        evs = _read_file(data, decoder)
        values = evs[-1].decode_rows()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    tmap = evs[-2].table
    assert (tmap.qualified_name, len(tmap.columns)) == ("app.t", ncols)
    assert values == [tuple(i * 7 for i in range(ncols))]
    # ~13-17.6 MB depending on what earlier tests left cached: a bound, far below what a
    # table map claiming 10**9 columns would allocate (see the tests above)
    assert peak < 24 << 20, f"{peak} bytes allocated for a {ncols}-column table"


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_error_does_not_depend_on_the_row_decoder(decoder):
    """The same message, class and location with either decoder (table maps are decoded in
    Python whichever decodes the rows)."""
    for body in (_claiming(10 ** 9), _real(MAX_COLUMNS + 1)):
        got = _peak(_read_file, _file(body), decoder)[0]
        ref = _peak(_read_file, _file(body), "python")[0]
        assert (type(got), str(got), got.position) == (type(ref), str(ref), ref.position)


# Fuzz harness style (tests/unit/test_fuzz_parser.py): fixed examples, derandomized.
@settings(max_examples=150, derandomize=True, deadline=None)
@given(count=st.integers(MAX_COLUMNS + 1, 2 ** 64 - 1),
       tail=st.binary(max_size=600), decoder=st.sampled_from(DECODERS),
       form=st.sampled_from([b"\xfc", b"\xfd", b"\xfe", None]))
def test_any_huge_count_raises_a_parse_error_and_allocates_little(count, tail, decoder, form):
    if form is None:
        count_bytes = lenenc(count)
    else:        # the count in any of the wider encodings (reduced to what fits)
        size = {b"\xfc": 2, b"\xfd": 3, b"\xfe": 8}[form]
        count = MAX_COLUMNS + 1 + count % ((1 << 8 * size) - MAX_COLUMNS - 1)
        count_bytes = form + count.to_bytes(size, "little")
    e, peak = _peak(_read_file, _file(_head(count_bytes) + tail), decoder)
    assert isinstance(e, ParseError) and (e.file, e.position) == (FILE, TABLE_MAP_POS)
    assert peak < 256 << 10, f"{peak} bytes allocated"


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("count, kind", [(2_000_000, EventType.WRITE_ROWS),
                                         (2_000_000, EventType.UPDATE_ROWS),
                                         (4097, EventType.DELETE_ROWS)])
def test_a_rows_event_claiming_millions_of_columns_is_refused_before_expanding_them(
        decoder, count, kind):
    """A rows event's column count is checked before its column bitmaps are expanded: 250 KB of
    bitmap claiming 2 million columns used to build a 2-million-entry tuple per image."""
    bitmap = b"\xff" * ((count + 7) // 8)
    body = (b"\x5a\x00\x00\x00\x00\x00" + b"\x01\x00" + b"\x02\x00" + lenenc(count) + bitmap
            + (bitmap if kind == EventType.UPDATE_ROWS else b""))
    data = binlog_file([FDE_8020, event(kind, body)])
    err, peak = _peak(_read_file, data, decoder)
    assert "claims %d columns" % count in str(err) and "corrupt" in str(err)
    assert peak < 4 * len(data) + (2 << 20), peak
