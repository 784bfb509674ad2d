"""Issue 12 (metadata and robustness items), byte-exact: PARTIAL_UPDATE_ROWS with a MINIMAL
before image, rows without a TABLE_MAP, 0xfb lengths, row-image errors with file/position and
one message for both decoders, the default charset of binlog files and unpadded CHAR, pre-5.6
temporal layouts, information_schema shape checks."""

from __future__ import annotations

import datetime as dt
import struct

import pytest
from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, query_body,
                                    rows_v2_body, table_map_body, xid_body)

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.constants import EventType
from cdc.binlog.files import collation_for_charset, read_events
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import assemble
from cdc.cli.changes import change_json
from cdc.errors import CdcError, ConfigurationError, SchemaError, TruncatedEventError
from cdc.replica.metadata import ServerColumn, TableMetadata, check_shape
from cdc.rows.backend import c_decoder_available
from cdc.values.kinds import ABSENT, JsonDiffs
from cdc.values.temporal import datetime_factory, time_factory, timestamp_factory
from cdc.values.types import ColumnDef

DECODERS = ["python"] + (["c"] if c_decoder_available() else [])

# {"a": 1} in MySQL's binary JSON (see test_mysql8_events.py)
JSON_A1 = bytes.fromhex("00" "0100" "0c00" "0b000100" "050100" "61")
DIFF_A2 = b"\x00" + lenenc(3) + b"$.a" + lenenc(3) + bytes.fromhex("050200")   # REPLACE $.a 2
DIFF_RM_B = b"\x02" + lenenc(3) + b"$.b"                                      # REMOVE $.b


def _tx(*inner: bytes) -> bytes:
    return binlog_file([FDE_8020, event(EventType.QUERY, query_body("BEGIN", "app")), *inner,
                        event(EventType.XID, xid_body(5))])


def _json_table():
    names = b"".join(lenenc(len(n)) + n for n in (b"id", b"doc"))
    return table_map_body(90, "app", "docs", bytes([T.LONG, T.JSON]), b"\x04", b"\x02",
                          optional=b"\x04" + lenenc(len(names)) + names
                          + b"\x08" + lenenc(1) + b"\x00")


def test_partial_json_update_with_minimal_before_image_delivers_the_diffs():
    # before image: id only (bitmap 01); after image: id and doc (bitmap 11), doc partial
    diffs = DIFF_A2 + DIFF_RM_B
    before = b"\x00" + struct.pack("<i", 7)
    after = (lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", 7)
             + struct.pack("<I", len(diffs)) + diffs)
    body = (struct.pack("<Q", 90)[:6] + struct.pack("<H", 1) + b"\x02\x00" + lenenc(2)
            + b"\x01" + b"\x03" + before + after)
    data = _tx(event(EventType.TABLE_MAP, _json_table()),
               event(EventType.PARTIAL_UPDATE_ROWS, body))
    (tx,) = list(assemble(iter_events(data)))
    (change,) = tx.changes()
    assert change.before == (7, ABSENT)
    assert type(change.after[1]) is JsonDiffs
    assert change.after[1].diffs == [{"op": "replace", "path": "$.a", "value": 2},
                                     {"op": "remove", "path": "$.b"}]
    assert change.key() == {"id": 7}
    line = change_json(change)
    assert ('"after": {"id": 7, "doc": {"$json_diff": [{"op": "replace", "path": "$.a", '
            '"value": 2}, {"op": "remove", "path": "$.b"}]}}') in line


def test_partial_json_update_with_full_before_image_still_applies():
    before = b"\x00" + struct.pack("<i", 7) + struct.pack("<I", len(JSON_A1)) + JSON_A1
    after = (lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", 7)
             + struct.pack("<I", len(DIFF_A2)) + DIFF_A2)
    data = _tx(event(EventType.TABLE_MAP, _json_table()),
               event(EventType.PARTIAL_UPDATE_ROWS,
                     rows_v2_body(90, 2, before + after, update=True)))
    (tx,) = list(assemble(iter_events(data)))
    assert [c.after for c in tx.changes()] == [(7, {"a": 2})]


def test_rows_event_without_table_map_is_a_schema_error_with_position():
    rows = event(EventType.WRITE_ROWS, rows_v2_body(77, 1, b"\x00" + struct.pack("<i", 1)))
    data = _tx(rows)
    with pytest.raises(SchemaError) as e:
        list(assemble(iter_events(data, file="bin.000001")))
    msg = str(e.value)
    assert "table id 77" in msg and "bin.000001" in msg
    pos = len(b"\xfebin") + len(FDE_8020) + len(event(EventType.QUERY, query_body("BEGIN", "app")))
    assert f"position {pos}" in msg


def test_null_length_byte_in_table_map_is_a_parse_error():
    body = bytearray(table_map_body(90, "app", "t", bytes([T.LONG]), b"", b"\x00"))
    ncols_at = 8 + 1 + 3 + 1 + 1 + 1 + 1    # table id, flags, "app\0", "t\0"
    assert body[ncols_at] == 1
    body[ncols_at] = 0xFB
    data = _tx(event(EventType.TABLE_MAP, bytes(body)))
    with pytest.raises(TruncatedEventError) as e:
        list(iter_events(data, file="bin.000002"))
    assert "0xfb" in str(e.value) and "bin.000002" in str(e.value)
    assert "position" in str(e.value)


def _int_varchar_table(optional: bytes = b""):
    return table_map_body(91, "app", "t", bytes([T.LONG, T.VARCHAR]), struct.pack("<H", 40),
                          b"\x02", optional=optional)


@pytest.mark.parametrize("decoder", DECODERS)
def test_truncated_row_image_names_table_column_file_and_position(decoder):
    names = b"".join(lenenc(len(n)) + n for n in (b"id", b"name"))
    tmap = _int_varchar_table(b"\x04" + lenenc(len(names)) + names)
    row = b"\x00" + struct.pack("<i", 1) + bytes((20,)) + b"short"   # says 20 bytes, has 5
    data = _tx(event(EventType.TABLE_MAP, tmap),
               event(EventType.WRITE_ROWS, rows_v2_body(91, 2, row)))
    evs = list(iter_events(data, file="bin.000003", row_decoder=decoder))
    rows_ev = next(ev for ev in evs if ev.type_name.endswith("ROWS") or hasattr(ev, "kind"))
    with pytest.raises(TruncatedEventError) as e:
        rows_ev.decode_rows()
    msg = str(e.value)
    assert msg == (f"row image 1 of app.t, column name (VARCHAR): the value runs past the end "
                   f"of the rows event (at file bin.000003, position {rows_ev.pos})")
    assert e.value.file == "bin.000003" and e.value.position == rows_ev.pos
    assert "unpack" not in msg


def test_both_decoders_give_the_same_message_for_every_truncation():
    if len(DECODERS) < 2:
        pytest.skip("the compiled decoder is not built")
    names = b"".join(lenenc(len(n)) + n for n in (b"id", b"name"))
    tmap = _int_varchar_table(b"\x04" + lenenc(len(names)) + names)
    full = b"\x00" + struct.pack("<i", 1) + bytes((5,)) + b"hello"
    for cut in range(1, len(full)):
        data = _tx(event(EventType.TABLE_MAP, tmap),
                   event(EventType.WRITE_ROWS, rows_v2_body(91, 2, full + full[:cut])))
        messages = set()
        for decoder in DECODERS:
            ev = [e for e in iter_events(data, row_decoder=decoder) if hasattr(e, "kind")][0]
            with pytest.raises(TruncatedEventError) as e:
                ev.decode_rows()
            messages.add(str(e.value))
        assert len(messages) == 1, messages
        assert "row image 2 of app.t" in messages.pop()


@pytest.mark.parametrize("decoder", DECODERS)
def test_files_without_charset_metadata_use_the_default_charset_and_never_pad_char(
        tmp_path, decoder):
    # CHAR(6) utf8mb4 (real type STRING, 24 bytes max), no optional metadata at all
    tmap = table_map_body(92, "app", "c", bytes([T.LONG, T.STRING]),
                          bytes((T.STRING, 24)), b"\x02")
    row = b"\x00" + struct.pack("<i", 1) + bytes((5,)) + "ab✓".encode()
    path = tmp_path / "bin.000001"
    path.write_bytes(_tx(event(EventType.TABLE_MAP, tmap),
                         event(EventType.WRITE_ROWS, rows_v2_body(92, 2, row))))
    (tx,) = assemble(read_events(path, row_decoder=decoder))
    assert [c.after for c in tx.changes()] == [(1, "ab✓")]
    (tx,) = assemble(read_events(path, row_decoder=decoder, charset="binary"))
    assert [c.after for c in tx.changes()] == [(1, "ab✓".encode())]      # not NUL-padded
    (tx,) = assemble(read_events(path, row_decoder=decoder, charset="latin1"))
    assert [c.after for c in tx.changes()] == [(1, "ab✓".encode().decode("cp1252"))]


def test_unknown_default_charset_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="unknown character set"):
        collation_for_charset("klingon")


def _col(type_code, meta=None):
    return ColumnDef(0, type_code, meta, True)


def test_mariadb_hires_temporal_layouts():
    # Byte vectors from MariaDB's Field_*_hires::store_TIME (pack_time, sec_part_shift,
    # big-endian): DATETIME(3) 2024-02-29 23:59:58.123 takes datetime_hires_bytes[3] = 7 bytes
    packed = ((((((2024 * 13 + 2) * 32 + 29) * 24 + 23) * 60 + 59) * 60 + 58) * 10 ** 6
              + 123000) // 1000
    dec = datetime_factory(_col(T.DATETIME, 3))
    assert dec(packed.to_bytes(7, "big"), 0) == (dt.datetime(2024, 2, 29, 23, 59, 58, 123000), 7)
    zero_point = (838 * 3600 + 59 * 60 + 59 + 1) * 10 ** 6 // 10
    v = -((1 * 3600 + 2 * 60 + 3) * 10 ** 6 + 400000) // 10 + zero_point    # -01:02:03.4, TIME(5)
    dec = time_factory(_col(T.TIME, 5))
    assert dec(v.to_bytes(5, "big"), 0) == (-dt.timedelta(hours=1, minutes=2, seconds=3.4), 5)
    dec = timestamp_factory(_col(T.TIMESTAMP, 2))
    assert dec(struct.pack(">I", 1) + bytes((50,)), 0) == (
        dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.timezone.utc), 5)


def test_hires_datetime_without_precision_is_an_error_not_a_date():
    # DATETIME(6) hires bytes read as the 8-byte decimal format (the "929242312-40-30" bug)
    packed = ((((((2024 * 13 + 2) * 32 + 29) * 24 + 23) * 60 + 59) * 60 + 58) * 10 ** 6)
    raw = packed.to_bytes(8, "big")
    with pytest.raises(CdcError, match="DATETIME.*mysql56_temporal_format"):
        datetime_factory(_col(T.DATETIME, None))(raw, 0)


def _server(name, data_type, column_type, **kw):
    kw.setdefault("precision", None)
    kw.setdefault("collation", None)
    kw.setdefault("primary_key", False)
    return ServerColumn(name, data_type, column_type, **kw)


def test_information_schema_fills_the_table_map_and_checks_its_shape():
    tmap = next(ev.table for ev in iter_events(_tx(event(EventType.TABLE_MAP,
                                                         _int_varchar_table())),
                                               charset=None)   # as the replica client parses
                if hasattr(ev, "table") and ev.table is not None)
    server = [_server("id", "int", "int(10) unsigned", primary_key=True),
              _server("name", "varchar", "varchar(40)", collation=8)]
    calls = []

    def query(sql, args):
        calls.append(args)
        return [(s.name, s.data_type, s.column_type, s.precision,
                 "latin1" if s.collation else None, "PRI" if s.primary_key else "",
                 s.collation, None, None, None, "YES") for s in server]
    meta = TableMetadata(query)
    meta.complete(tmap, file="f", position=4)
    meta.complete(tmap, file="f", position=4)
    assert calls == [("app", "t")]
    assert tmap.column_names == ["id", "name"] and tmap.primary_key == [0]
    assert tmap.columns[0].unsigned and tmap.columns[1].collation == 8
    with pytest.raises(SchemaError) as e:
        check_shape(tmap, [server[0], _server("name", "int", "int(11)")], " (at file f, position 4)")
    msg = str(e.value)
    assert "app.t (at file f, position 4)" in msg and "(INT, VARCHAR)" in msg
    assert "(id int(10) unsigned, name int(11))" in msg and "binlog_row_metadata=FULL" in msg
