"""Text and character sets (issue 12): ENUM/SET members in their charset, the server's charset
tables, invalid UTF-8 kept losslessly, QUERY text in its client charset, truncated QUERY events,
one-column JSON renderers, MySQL JSON in mysqlbinlog text.  Byte-exact events; the live
counterpart (every charset against the server's own CONVERT) is tests/live/test_charsets_live.py.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys

import pytest

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.constants import EventType
from cdc.binlog.parser import iter_events
from cdc.binlog.tablemap import decode_table_map
from cdc.errors import TruncatedEventError
from cdc.rows import backend as B
from cdc.values.charsets import MYSQL_LATIN1_TABLE, make_text_decoder
from cdc.values.kinds import InvalidText, JsonOpaque
from cdc.values.render import (compile_json_pair_renderer, compile_json_renderer,
                               mysqlbinlog_value, row_json)
from cdc.values.types import ColumnDef
from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, query_body,
                                    rows_v2_body, table_map_body, xid_body)

UTF8MB4, LATIN1, UCS2, UTF16, UTF32, CP1251, EUCJPMS = 45, 8, 35, 54, 60, 51, 97


def _field(ftype: int, value: bytes) -> bytes:
    return bytes((ftype,)) + lenenc(len(value)) + value


def _names(*names: str, codec: str = "utf-8") -> bytes:
    return b"".join(lenenc(len(n.encode(codec))) + n.encode(codec) for n in names)


def _members(codec: str, *columns: tuple[str, ...]) -> bytes:
    return b"".join(lenenc(len(c)) + _names(*c, codec=codec) for c in columns)


# --- item 2: ENUM/SET members in the ENUM/SET charset (which comes after them) -----------------

@pytest.mark.parametrize("collation, codec", [(LATIN1, "cp1252"), (UCS2, "utf-16-be"),
                                              (UTF16, "utf-16-be"), (UTF32, "utf-32-be"),
                                              (CP1251, "cp1251")])
def test_enum_set_members_decoded_in_their_charset(collation, codec):
    enum_members = ("Жук", "д") if codec == "cp1251" else ("é", "ü€", "ß")
    set_members = ("Жук", "д", "😀" if "utf" in codec else "x")
    types = bytes((T.STRING, T.STRING))
    meta = bytes((T.ENUM, 1, T.SET, 1))
    optional = (_field(4, _names("e", "s"))
                + _field(5, _members(codec, set_members) if codec != "cp1252" else
                         _members(codec, ("a", "b")))
                + _field(6, _members(codec, enum_members))
                + _field(10, lenenc(collation)))
    body = table_map_body(7, "db", "t", types, meta, b"\x00", optional)
    tmap = decode_table_map(body, 8)
    e, s = tmap.columns
    assert (e.real_type, s.real_type) == (T.ENUM, T.SET)
    assert e.collation == s.collation == collation
    assert e.enum_values == list(enum_members)
    assert s.set_values == (["a", "b"] if codec == "cp1252" else list(set_members))


def test_enum_members_per_column_charset_and_unknown():
    types = bytes((T.STRING, T.STRING))
    meta = bytes((T.ENUM, 1, T.ENUM, 1))
    optional = (_field(6, lenenc(1) + _names("é", codec="cp1252") + lenenc(1) + _names("é"))
                + _field(11, lenenc(LATIN1) + lenenc(UTF8MB4)))
    tmap = decode_table_map(table_map_body(7, "db", "t", types, meta, b"\x00", optional), 8)
    assert [c.enum_values for c in tmap.columns] == [["é"], ["é"]]
    # no charset field: UTF-8 as before
    optional = _field(6, lenenc(1) + _names("é") + lenenc(1) + _names("ü"))
    tmap = decode_table_map(table_map_body(7, "db", "t", types, meta, b"\x00", optional), 8)
    assert [c.enum_values for c in tmap.columns] == [["é"], ["ü"]]


# --- item 3: the server's tables ------------------------------------------------------------

def test_single_byte_tables_are_the_servers():
    # values the generated tables hold (from MariaDB 10.11's CONVERT ... USING utf8mb4)
    dec = {cs: make_text_decoder(cid) for cs, cid in
           [("dec8", 3), ("hp8", 6), ("swe7", 10), ("armscii8", 32), ("keybcs2", 37),
            ("geostd8", 92), ("ascii", 11), ("latin1", 8)]}
    assert dec["swe7"](b"{|}~") == "äöåü"          # 7-bit Swedish, not latin-1
    assert dec["swe7"](b"\x80") == "?"             # the server converts it to '?'
    assert dec["armscii8"](b"\xb2\xb3") == "Աա"
    assert dec["geostd8"](b"\xc0\xc1") == "აბ"
    assert dec["keybcs2"](b"\x80\x87") == "Čč"
    assert dec["ascii"](b"A\x80") == "A?"
    assert dec["latin1"](b"\x80\x81\x9f\xff") == "€\x81Ÿÿ"
    assert MYSQL_LATIN1_TABLE[0x80] == "€" and len(MYSQL_LATIN1_TABLE) == 256
    for name, d in dec.items():        # every byte decodes to one character
        assert len(d(bytes(range(256)))) == 256, name


def test_eucjpms_nec_and_ibm_extensions():
    dec = make_text_decoder(EUCJPMS)
    # NEC row 13, NEC-selected IBM extensions (row 89+), IBM extensions (8F F3..), user area
    assert dec(bytes.fromhex("ADA1ADA2ADB4ADB5")) == "①②⑳Ⅰ"
    assert dec(bytes.fromhex("8FF3F3")) == "ⅰ"
    assert dec(bytes.fromhex("F9A1")) == "\ue178"       # the server: user-defined area
    assert dec(bytes.fromhex("41A1A28EB1")) == "A、ｱ"
    assert dec(bytes.fromhex("41A141")) == "A?A"         # malformed: '?' as the server
    assert dec(bytes.fromhex("8FA1A1")) == "?"
    assert "①".encode("mysql_eucjpms") == bytes.fromhex("ADA1")


# --- item 5: invalid UTF-8 ------------------------------------------------------------------

def _invalid_utf8_binlog(tmp_path):
    optional = _field(2, lenenc(UTF8MB4)) + _field(4, _names("c"))
    tm = table_map_body(7, "db", "t", bytes((T.VARCHAR,)), struct.pack("<H", 40), b"\x01",
                        optional)
    rows = b"".join(b"\x00" + lenenc(len(v)) + v for v in (b"\xc3", b"A\xc3\xa9", b"\xff\xfe"))
    return _one_insert_binlog(tmp_path, tm, 1, rows)


def _one_insert_binlog(tmp_path, table_map: bytes, ncols: int, rows: bytes):
    """A binlog file of one transaction: *table_map* (table id 7) and one WRITE_ROWS of *rows*."""
    data = binlog_file([event(15, FDE_8020[19:-4]),
                        event(EventType.QUERY, query_body("BEGIN", "db")),
                        event(EventType.TABLE_MAP, table_map),
                        event(EventType.WRITE_ROWS, rows_v2_body(7, ncols, rows)),
                        event(EventType.XID, xid_body(9))])
    path = tmp_path / "bin.000001"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("decoder", ["python", "c"])
def test_invalid_utf8_stays_bytes_in_both_decoders(tmp_path, decoder):
    if decoder == "c" and not B.c_decoder_available():
        pytest.skip("compiled decoder not built")
    path = _invalid_utf8_binlog(tmp_path)
    (ev,) = [e for e in iter_events(path.read_bytes(), row_decoder=decoder)
             if e.header[1] == EventType.WRITE_ROWS]
    rows = ev.decode_rows()
    assert rows == [(b"\xc3",), ("Aé",), (b"\xff\xfe",)]
    assert [type(r[0]) for r in rows] == [InvalidText, str, InvalidText]
    assert row_json(["c"], rows[0]) == '{"c": {"$binary": "ww=="}}'
    col = ev.table.columns[0]
    assert compile_json_renderer([col], ["c"])(rows) == [
        '{"c": {"$binary": "ww=="}}', '{"c": "Aé"}', '{"c": {"$binary": "//4="}}']
    assert mysqlbinlog_value(rows[0][0], col) == b"'\xc3'"


def test_invalid_utf8_jsonl_cli(tmp_path):
    path = _invalid_utf8_binlog(tmp_path)
    res = subprocess.run([sys.executable, "-m", "cdc", "decode", "--format", "jsonl", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    afters = [json.loads(line)["after"]["c"] for line in res.stdout.splitlines()]
    assert afters == [{"$binary": "ww=="}, "Aé", {"$binary": "//4="}]
    assert base64.b64decode(afters[0]["$binary"]) == b"\xc3"


# --- item 6 / 10: QUERY text and lengths ----------------------------------------------------

def _query_events(body: bytes):
    data = binlog_file([event(15, FDE_8020[19:-4]), event(EventType.QUERY, body)])
    return [e for e in iter_events(data) if e.header[1] == EventType.QUERY]


def test_query_text_in_its_client_charset():
    sql = "CREATE TABLE t (c VARCHAR(5) DEFAULT 'é€')"
    status = b"\x04" + struct.pack("<HHH", LATIN1, LATIN1, UTF8MB4)     # Q_CHARSET_CODE
    body = (struct.pack("<IIBHH", 7, 0, 2, 0, len(status)) + status + b"db\0"
            + sql.encode("cp1252"))
    (ev,) = _query_events(body)
    assert ev.query == sql and ev.schema == "db"
    status = b"\x04" + struct.pack("<HHH", CP1251, CP1251, UTF8MB4)
    body = (struct.pack("<IIBHH", 7, 0, 2, 0, len(status)) + status + b"db\0"
            + "SELECT 'Жук'".encode("cp1251"))
    assert _query_events(body)[0].query == "SELECT 'Жук'"
    # no charset status variable: UTF-8
    assert _query_events(query_body("SELECT 'é'", "db"))[0].query == "SELECT 'é'"


@pytest.mark.parametrize("status_len, schema_len", [(200, 2), (0, 90)])
def test_query_lengths_past_the_body(status_len, schema_len):
    body = struct.pack("<IIBHH", 7, 0, schema_len, 0, status_len) + b"db\0BEGIN"
    with pytest.raises(TruncatedEventError) as info:
        _query_events(body)
    assert info.value.position == 4 + 121 and "QUERY" in str(info.value)   # after the FDE


# --- item 4: one-column tables --------------------------------------------------------------

def test_json_renderers_of_one_column():
    col = ColumnDef(0, T.DOUBLE, 8, True)
    assert compile_json_renderer([col], ["x1"])([(4.2,), (None,)]) == ['{"x1": 4.2}',
                                                                       '{"x1": null}']
    assert compile_json_renderer([col], ["x1"], [0])([(4.2,)]) == ['{"x1": 4.2}']
    two = [ColumnDef(0, T.LONG, None, True), col]
    assert compile_json_renderer(two, ["id", "x1"], [1])([(1, 4.2)]) == ['{"x1": 4.2}']
    assert compile_json_pair_renderer([col], ["x1"])([((1.5,), (2.5,))]) == (
        ['{"x1": 1.5}'], ['{"x1": 2.5}'])


# --- item 7: MySQL JSON in mysqlbinlog -v text ----------------------------------------------

def test_mysqlbinlog_json_is_json_text():
    col = ColumnDef(0, T.JSON, 4, True)
    # what decode_json gives; mysqlbinlog prints MySQL's JSON text, quoted (not a Python repr)
    doc = {"a": [1, True], "o": JsonOpaque(b"\x01", 252)}
    assert mysqlbinlog_value(doc, col) == (
        b"'{\"a\": [1, true], \"o\": \"base64:type252:AQ==\"}'")


# --- decode's text output prints the stored bytes ------------------------------------------------

SJIS, UTF16LE = 13, 56


@pytest.mark.parametrize("decoder", ["python", "c"])
def test_text_output_prints_the_stored_bytes_not_re_encoded_text(tmp_path, decoder):
    """mysqlbinlog -v prints a text column's stored bytes. Decoding to str and encoding back
    cannot give them: sjis 81 20 (no character) decodes to '?' + ' ', and a CHAR in utf16le
    ending in a 00 byte must not lose it as if it were BINARY padding."""
    if decoder == "c" and not B.c_decoder_available():
        pytest.skip("compiled decoder not built")
    optional = (_field(3, lenenc(SJIS) + lenenc(UTF16LE) + lenenc(63))
                + _field(4, _names("s", "u", "b")))
    types = bytes((T.STRING, T.STRING, T.STRING))
    meta = bytes((T.STRING, 20, T.STRING, 20, T.STRING, 4))
    tm = table_map_body(7, "db", "t", types, meta, b"\x07", optional)
    rows = b"\x00" + b"".join(lenenc(len(v)) + v for v in (b"\x81\x20x", b"A\x00", b"ab"))
    path = _one_insert_binlog(tmp_path, tm, 3, rows)
    (ev,) = [e for e in iter_events(path.read_bytes(), row_decoder=decoder)
             if e.header[1] == EventType.WRITE_ROWS]
    assert ev.decode_rows() == [("? x", "A", b"ab\0\0")]     # the values: decoded, BINARY padded
    res = subprocess.run([sys.executable, "-m", "cdc", "decode", str(path)], capture_output=True,
                         timeout=60, env={**os.environ, "BINLOG_CDC_DECODER": decoder})
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l.startswith(b"###   @")]
    assert lines == [b"###   @1='\x81 x'", b"###   @2='A\\x00'", b"###   @3='ab'"]
