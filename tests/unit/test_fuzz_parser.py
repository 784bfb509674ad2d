"""Property-based fuzzing of the parser (hypothesis): binlog files built byte-exact, with
``binlog_checksum=NONE`` and CRC32, mutated (bytes flipped/set, ranges inserted, deleted,
truncated) and fed in arbitrary chunks.  Whatever the bytes, reading them -- events, transactions,
decoded rows, their JSON text -- raises nothing but :class:`~cdc.errors.CdcError` subclasses,
ends within the deadline and allocates a bounded amount of memory.  Repeatable: a fixed number
of examples, derandomized."""

from __future__ import annotations

import datetime as _dt
import struct
import tracemalloc
import zlib

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.binlog_builder import (FDE_8020, MAGIC, event, lenenc, query_body, rows_v2_body,
                                    table_map_body, xid_body)

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.constants import EventType
from cdc.binlog.parser import BinlogParser
from cdc.binlog.transactions import TransactionAssembler
from cdc.cli.changes import change_json
from cdc.errors import CdcError
from cdc.rows.backend import c_decoder_available

JSON_A1 = bytes.fromhex("00" "0100" "0c00" "0b000100" "050100" "61")
DIFF_A2 = b"\x00" + lenenc(3) + b"$.a" + lenenc(3) + bytes.fromhex("050200")
MEMORY_LIMIT = 64 << 20


def _names(*names: bytes) -> bytes:
    raw = b"".join(lenenc(len(n)) + n for n in names)
    return b"\x04" + lenenc(len(raw)) + raw


def _events() -> list[tuple[int, bytes]]:
    """(type, body) of a few transactions over many column types."""
    # id INT, v VARCHAR(40) utf8mb4, c CHAR(8), d DECIMAL(10,2), dt DATETIME2(3), j JSON,
    # e ENUM, t TIMESTAMP(old), b BLOB
    types = bytes([T.LONG, T.VARCHAR, T.STRING, T.NEWDECIMAL, T.DATETIME2, T.JSON, T.STRING,
                   T.TIMESTAMP, T.BLOB])
    meta = (struct.pack("<H", 160) + bytes((T.STRING, 32)) + bytes((10, 2)) + b"\x03" + b"\x04"
            + bytes((T.ENUM, 1)) + b"\x02")
    tmap_full = table_map_body(90, "app", "t", types, meta, b"\xfe\x01",
                               optional=_names(b"id", b"v", b"c", b"d", b"dt", b"j", b"e", b"ts",
                                               b"b") + b"\x08" + lenenc(1) + b"\x00")
    tmap_bare = table_map_body(91, "app", "u", types, meta, b"\xfe\x01")
    row = (b"\x00\x00" + struct.pack("<i", 1) + bytes((3,)) + b"abc" + bytes((2,)) + b"xy"
           + bytes.fromhex("800003e807") + bytes.fromhex("8000000000") + b"\x00\x00"
           + struct.pack("<I", len(JSON_A1)) + JSON_A1 + b"\x01" + struct.pack("<I", 86400)
           + struct.pack("<H", 3) + b"\x00\xff\x01")
    evs = [(EventType.QUERY, query_body("BEGIN", "app")),
           (EventType.TABLE_MAP, tmap_full),
           (EventType.WRITE_ROWS, rows_v2_body(90, 9, row + row)),
           (EventType.UPDATE_ROWS, rows_v2_body(90, 9, row + row, update=True)),
           (EventType.TABLE_MAP, tmap_bare),
           (EventType.DELETE_ROWS, rows_v2_body(91, 9, row)),
           (EventType.XID, xid_body(9)),
           (EventType.QUERY, query_body("BEGIN", "app"))]
    # id INT, doc JSON: a PARTIAL_UPDATE_ROWS with a full and a MINIMAL before image
    jmap = table_map_body(92, "app", "docs", bytes([T.LONG, T.JSON]), b"\x04", b"\x02",
                          optional=_names(b"id", b"doc"))
    before = b"\x00" + struct.pack("<i", 7) + struct.pack("<I", len(JSON_A1)) + JSON_A1
    after = (lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", 7)
             + struct.pack("<I", len(DIFF_A2)) + DIFF_A2)
    evs += [(EventType.TABLE_MAP, jmap),
            (EventType.PARTIAL_UPDATE_ROWS, rows_v2_body(92, 2, before + after, update=True)),
            (EventType.XID, xid_body(10)),
            (EventType.QUERY, query_body("CREATE TABLE x (a INT)", "app"))]
    return evs


def _file(crc: bool) -> bytes:
    out = bytearray(MAGIC)
    fde = FDE_8020 if crc else _fde_none()
    out += _with_pos(fde, len(out), crc=True)    # the FDE always has its 4 checksum bytes
    for type_code, body in _events():
        out += _with_pos(event(type_code, body, checksum=crc), len(out), crc=crc)
    return bytes(out)


def _fde_none() -> bytes:
    raw = bytearray(FDE_8020)
    raw[-5] = 0                                  # checksum algorithm: OFF
    return bytes(raw)


def _with_pos(ev: bytes, at: int, *, crc: bool) -> bytes:
    raw = bytearray(ev)
    raw[13:17] = struct.pack("<I", at + len(raw))
    if crc:
        raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    return bytes(raw)


SEEDS = {True: _file(True), False: _file(False)}
DECODERS = ["python"] + (["c"] if c_decoder_available() else [])

mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 1 << 16), st.integers(0, 255)),
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(0, 7)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 16)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 16), st.just(0)),
)


def _mutate(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for op, at, arg in mutations:
        if not buf:
            break
        i = at % len(buf)
        if op == "set":
            buf[i] = arg
        elif op == "flip":
            buf[i] ^= 1 << arg
        elif op == "insert":
            buf[i:i] = arg
        elif op == "delete":
            del buf[i:i + arg]
        else:
            del buf[i:]
    return bytes(buf)


def _chunks(data: bytes, sizes) -> list[bytes]:
    out, p = [], 0
    for n in sizes:
        if p >= len(data):
            break
        out.append(data[p:p + n])
        p += n
    if p < len(data):
        out.append(data[p:])
    return out


def _consume(data: bytes, sizes, verify: bool, decoder: str) -> None:
    parser = BinlogParser(file="fuzz.000001", verify_checksum=verify, row_decoder=decoder)
    asm = TransactionAssembler()
    for chunk in _chunks(data, sizes):
        parser.feed(chunk)
        for ev in parser.events():
            if hasattr(ev, "decode_rows") and ev.table is not None:
                ev.decode_rows()
            tx = asm.push(ev)
            if tx is not None:
                for change in tx.changes():
                    change_json(change)
    parser.close()


def test_seeds_are_valid():
    for crc, data in SEEDS.items():
        for decoder in DECODERS:
            _consume(data, [len(data)], True, decoder)
        parser = BinlogParser(verify_checksum=True)
        parser.feed(data)
        asm = TransactionAssembler()
        txs = [tx for ev in parser.events() if (tx := asm.push(ev)) is not None]
        changes = [c for tx in txs for c in tx.changes()]
        assert [c.op for c in changes] == ["c", "c", "u", "d", "u"]
        # text without charset metadata: utf8mb4, the parser's default as every file decoder's
        assert changes[0].after[:3] == (1, "abc", "xy") and changes[-1].after == (7, {"a": 2})


@settings(max_examples=400, derandomize=True, deadline=_dt.timedelta(seconds=2),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(crc=st.booleans(), verify=st.booleans(), decoder=st.sampled_from(DECODERS),
       mutations=st.lists(mutation, min_size=0, max_size=6),
       sizes=st.lists(st.integers(1, 300), max_size=12))
# found by longer runs: a primary-key index past the columns; a NUL in a table name
@example(crc=True, verify=False, decoder="python",
         mutations=[("truncate", 786, 0), ("set", 6542, 9)], sizes=[])
@example(crc=False, verify=False, decoder="python", mutations=[("set", 1142, 0)], sizes=[])
def test_mutated_binlogs_raise_only_cdc_errors(crc, verify, decoder, mutations, sizes):
    data = _mutate(SEEDS[crc], mutations)
    tracemalloc.start()
    try:
        _consume(data, sizes, verify, decoder)
    except CdcError:
        pass
    finally:
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT, f"{peak} bytes allocated for a {len(data)}-byte input"
