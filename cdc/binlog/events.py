"""Binlog event classes and the one event registry (type code -> decoder).

Each decoder gets the event *body* (bytes after the common header, checksum removed) and the
parser context (format description, table maps), and returns an :class:`Event`.
Unknown event types, and types with the IGNORABLE flag this parser does not know, come out as
:class:`RawEvent` -- never dropped.
"""

from __future__ import annotations

import struct
import zlib
from typing import Callable, NamedTuple

from cdc.binlog.constants import (DELETE_TYPES, UPDATE_TYPES, WRITE_TYPES, ChecksumAlg, EventFlag, EventType)
from cdc.errors import CompressionError, EncryptedBinlogError, SchemaError, TruncatedEventError
from cdc.binlog.gtid import (MariaGtid, decode_maria_gtid_body, mysql_gtid_info, mysql_gtid_text,
                   parse_mysql_gtid_body)
from cdc.rows.decode import decode_images, present_columns
from cdc.binlog.tablemap import TableMap, decode_table_map
from cdc.binlog.wire import read_lenenc


class EventHeader(NamedTuple):
    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int


HEADER = struct.Struct("<IBIIIH")


class Event:
    """Base class. ``file``/``pos`` locate the event (``pos`` is None when the stream did not say);
    ``end_pos`` is the position of the next event."""

    __slots__ = ("header", "file", "pos", "end_pos")
    _fields: tuple[str, ...] = ()

    def __init__(self, header: EventHeader):
        self.header = header
        self.file: str | None = None
        self.pos: int | None = None
        self.end_pos: int | None = None

    @property
    def type_code(self) -> int:
        return self.header.type_code

    @property
    def type_name(self) -> str:
        try:
            return EventType(self.header.type_code).name
        except ValueError:
            return f"UNKNOWN_{self.header.type_code}"

    @property
    def timestamp(self) -> int:
        return self.header.timestamp

    @property
    def server_id(self) -> int:
        return self.header.server_id

    def fields(self) -> dict:
        return {f: getattr(self, f) for f in self._fields}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields().items())
        return f"{type(self).__name__}(pos={self.pos}, {inner})"


class Context:
    """What the parser knows while decoding: the format description, checksum, table maps."""

    def __init__(self, checksum: ChecksumAlg | None = None):
        self.fde: FormatDescriptionEvent | None = None
        self.checksum = checksum
        self.tables: dict[int, TableMap] = {}
        self._tmap_cache: dict[bytes, TableMap] = {}
        self.file: str | None = None

    def post_header_len(self, type_code: int, default: int) -> int:
        fde = self.fde
        if fde is None or type_code < 1 or type_code > len(fde.post_header_lengths):
            return default
        return fde.post_header_lengths[type_code - 1]

    @property
    def is_mariadb(self) -> bool:
        return bool(self.fde and self.fde.is_mariadb)


Decode = Callable[[EventHeader, memoryview, Context], Event]
# Decoders run only under the parser, which sets file/pos/end_pos on what they return: the
# hot ones skip Event.__init__ (a Python call per event) and set only the header.
_new_event = object.__new__
_new_tuple = tuple.__new__
REGISTRY: dict[int, Decode] = {}


def register(*type_codes: int):
    def deco(fn):
        for t in type_codes:
            if t in REGISTRY:
                raise RuntimeError(f"event type {t} registered twice")
            REGISTRY[t] = fn
        return fn
    return deco


# --- control events -------------------------------------------------------------------------------


class FormatDescriptionEvent(Event):
    __slots__ = ("binlog_version", "server_version", "create_timestamp", "header_length",
                 "post_header_lengths", "checksum_alg")
    _fields = ("binlog_version", "server_version", "header_length", "checksum_alg")

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()


def _version_tuple(text: str) -> tuple[int, int, int]:
    parts = []
    for piece in text.split("-")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)  # type: ignore[return-value]


def parse_fde_body(header: EventHeader, body) -> FormatDescriptionEvent:
    """FDE body *including* any checksum trailer (the FDE says itself whether it has one)."""
    ev = FormatDescriptionEvent(header)
    ev.binlog_version = int.from_bytes(body[0:2], "little")
    ev.server_version = bytes(body[2:52]).split(b"\0", 1)[0].decode("ascii", "replace")
    ev.create_timestamp = int.from_bytes(body[52:56], "little")
    ev.header_length = body[56]
    rest = bytes(body[57:])
    if _version_tuple(ev.server_version) >= (5, 6, 1) and len(rest) >= 5:
        ev.checksum_alg = ChecksumAlg(rest[-5]) if rest[-5] in (0, 1, 255) else rest[-5]
        ev.post_header_lengths = rest[:-5]
    else:
        ev.checksum_alg = ChecksumAlg.UNDEF
        ev.post_header_lengths = rest
    if ev.binlog_version != 4:
        from cdc.errors import UnsupportedBinlogVersionError
        raise UnsupportedBinlogVersionError(
            f"FORMAT_DESCRIPTION_EVENT says binlog version {ev.binlog_version}; only v4 (MySQL 5.0+) "
            f"is decoded")
    return ev


class RotateEvent(Event):
    __slots__ = ("next_file", "next_position")
    _fields = ("next_file", "next_position", "artificial")

    @property
    def artificial(self) -> bool:
        """True for the rotate a dump thread invents at connect time (not a file boundary)."""
        return bool(self.header.flags & EventFlag.ARTIFICIAL) or self.header.timestamp == 0


@register(EventType.ROTATE)
def _rotate(h, body, ctx):
    ev = RotateEvent(h)
    phl = ctx.post_header_len(EventType.ROTATE, 8)
    ev.next_position = int.from_bytes(body[0:8], "little") if phl >= 8 else 4
    ev.next_file = bytes(body[phl:]).decode("utf-8", "replace")
    if not ev.next_file:
        raise TruncatedEventError("ROTATE event carries no file name")
    return ev


class StopEvent(Event):
    __slots__ = ()


@register(EventType.STOP)
def _stop(h, body, ctx):
    return StopEvent(h)


_U64 = struct.Struct("<Q").unpack_from


class XidEvent(Event):
    __slots__ = ("xid",)
    _fields = ("xid",)


@register(EventType.XID)
def _xid(h, body, ctx):
    ev = _new_event(XidEvent)
    ev.header = h
    ev.xid = _U64(body, 0)[0]
    return ev


class IntvarEvent(Event):
    __slots__ = ("kind", "value")
    _fields = ("kind", "value")
    KINDS = {1: "LAST_INSERT_ID", 2: "INSERT_ID"}


@register(EventType.INTVAR)
def _intvar(h, body, ctx):
    ev = IntvarEvent(h)
    ev.kind = IntvarEvent.KINDS.get(body[0], str(body[0]))
    ev.value = struct.unpack_from("<Q", body, 1)[0]
    return ev


class RandEvent(Event):
    __slots__ = ("seed1", "seed2")
    _fields = ("seed1", "seed2")


@register(EventType.RAND)
def _rand(h, body, ctx):
    ev = RandEvent(h)
    ev.seed1, ev.seed2 = struct.unpack_from("<QQ", body, 0)
    return ev


class UserVarEvent(Event):
    __slots__ = ("name", "is_null", "value_type", "collation", "value", "flags")
    _fields = ("name", "is_null", "value_type", "value")


@register(EventType.USER_VAR)
def _user_var(h, body, ctx):
    ev = UserVarEvent(h)
    n = int.from_bytes(body[0:4], "little")
    ev.name = bytes(body[4:4 + n]).decode("utf-8", "replace")
    p = 4 + n
    ev.is_null = bool(body[p])
    p += 1
    ev.value_type = ev.collation = ev.value = None
    ev.flags = 0
    if not ev.is_null:
        ev.value_type = body[p]
        ev.collation = int.from_bytes(body[p + 1:p + 5], "little")
        vlen = int.from_bytes(body[p + 5:p + 9], "little")
        raw = bytes(body[p + 9:p + 9 + vlen])
        if len(raw) != vlen:
            raise TruncatedEventError("USER_VAR value runs past the end of the event")
        p += 9 + vlen
        if p < len(body):
            ev.flags = body[p]
        if ev.value_type == 0:  # STRING_RESULT
            ev.value = raw.decode("utf-8", "replace") if ev.collation != 63 else raw
        elif ev.value_type == 1:  # REAL_RESULT
            ev.value = struct.unpack("<d", raw)[0]
        elif ev.value_type == 2:  # INT_RESULT
            ev.value = int.from_bytes(raw, "little", signed=not (ev.flags & 1))
        elif ev.value_type == 4:  # DECIMAL_RESULT: precision, scale, binary decimal
            from cdc.values.types import read_newdecimal
            ev.value = read_newdecimal(raw, 2, raw[0], raw[1])[0]
        else:
            ev.value = raw
    return ev


class IncidentEvent(Event):
    __slots__ = ("incident", "message")
    _fields = ("incident", "message")


@register(EventType.INCIDENT)
def _incident(h, body, ctx):
    ev = IncidentEvent(h)
    ev.incident = int.from_bytes(body[0:2], "little")
    n = body[2] if len(body) > 2 else 0
    ev.message = bytes(body[3:3 + n]).decode("utf-8", "replace")
    return ev


class HeartbeatEvent(Event):
    """Sent by the source when idle; ``log_file``/``log_pos`` say where the source is."""

    __slots__ = ("log_file", "log_pos")
    _fields = ("log_file", "log_pos")


@register(EventType.HEARTBEAT)
def _heartbeat(h, body, ctx):
    ev = HeartbeatEvent(h)
    ev.log_file = bytes(body).decode("utf-8", "replace")
    ev.log_pos = h.log_pos
    return ev


def _tlv_fields(body, pos: int = 0) -> tuple[dict[int, bytes], int]:
    """MySQL's on-the-wire type/length/value fields (HEARTBEAT_V2, TRANSACTION_PAYLOAD)."""
    out: dict[int, bytes] = {}
    end = len(body)
    while pos < end:
        ftype, pos = read_lenenc(body, pos)
        if ftype == 0:  # header end mark
            break
        length, pos = read_lenenc(body, pos)
        if pos + length > end:
            raise TruncatedEventError("event field runs past the end of the event")
        out[ftype] = bytes(body[pos:pos + length])
        pos += length
    return out, pos


@register(EventType.HEARTBEAT_V2)
def _heartbeat_v2(h, body, ctx):
    ev = HeartbeatEvent(h)
    fields, _ = _tlv_fields(body)
    ev.log_file = fields.get(1, b"").decode("utf-8", "replace")
    ev.log_pos = read_lenenc(fields[2], 0)[0] if 2 in fields else h.log_pos
    return ev


class RowsQueryEvent(Event):
    """The SQL text of the statement behind the following rows events (MySQL ROWS_QUERY,
    MariaDB ANNOTATE_ROWS); ``query`` is decoded on first access."""

    __slots__ = ("_query", "_raw")
    _fields = ("query",)

    @property
    def query(self) -> str:
        if self._query is None:
            self._query = self._raw.decode("utf-8", "replace")
        return self._query


@register(EventType.ROWS_QUERY)
def _rows_query(h, body, ctx):
    ev = _new_event(RowsQueryEvent)
    ev.header = h
    ev._query = None
    ev._raw = bytes(body[1:])
    return ev


@register(EventType.MARIA_ANNOTATE_ROWS)
def _annotate_rows(h, body, ctx):
    ev = _new_event(RowsQueryEvent)
    ev.header = h
    ev._query = None
    ev._raw = bytes(body)
    return ev


class BinlogCheckpointEvent(Event):
    __slots__ = ("binlog_file",)
    _fields = ("binlog_file",)


@register(EventType.MARIA_BINLOG_CHECKPOINT)
def _checkpoint(h, body, ctx):
    ev = BinlogCheckpointEvent(h)
    n = int.from_bytes(body[0:4], "little")
    ev.binlog_file = bytes(body[4:4 + n]).decode("utf-8", "replace")
    return ev


@register(EventType.MARIA_START_ENCRYPTION)
def _start_encryption(h, body, ctx):
    raise EncryptedBinlogError(
        "START_ENCRYPTION_EVENT: this binlog is encrypted (MariaDB encrypt_binlog=ON); binlog-cdc "
        "cannot decrypt files. Read it over replication instead (the server decrypts for replicas)")


class RawEvent(Event):
    """An event this parser does not decode (unknown type, or obsolete); ``body`` is kept."""

    __slots__ = ("body",)
    _fields = ("type_name", "ignorable", "size")

    @property
    def ignorable(self) -> bool:
        return bool(self.header.flags & EventFlag.IGNORABLE)

    @property
    def size(self) -> int:
        return len(self.body)


def decode_raw(h, body, ctx) -> RawEvent:
    ev = RawEvent(h)
    ev.body = bytes(body)
    return ev


# Obsolete (pre-5.0 / statement LOAD DATA) and never-decoded types: raw, not dropped
for _t in (EventType.LOAD, EventType.SLAVE, EventType.CREATE_FILE, EventType.EXEC_LOAD,
           EventType.NEW_LOAD, EventType.IGNORABLE, EventType.PRE_GA_WRITE_ROWS,
           EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS):
    register(_t)(decode_raw)


# --- LOAD DATA (5.0+ statement format) -----------------------------------------------------------


class LoadBlockEvent(Event):
    """BEGIN_LOAD_QUERY / APPEND_BLOCK: a block of the file a LOAD DATA statement loads."""

    __slots__ = ("file_id", "data")
    _fields = ("file_id", "length")

    @property
    def length(self) -> int:
        return len(self.data)


@register(EventType.BEGIN_LOAD_QUERY, EventType.APPEND_BLOCK)
def _load_block(h, body, ctx):
    ev = LoadBlockEvent(h)
    ev.file_id = int.from_bytes(body[0:4], "little")
    ev.data = bytes(body[4:])
    return ev


class DeleteFileEvent(Event):
    __slots__ = ("file_id",)
    _fields = ("file_id",)


@register(EventType.DELETE_FILE)
def _delete_file(h, body, ctx):
    ev = DeleteFileEvent(h)
    ev.file_id = int.from_bytes(body[0:4], "little")
    return ev


# --- QUERY ---------------------------------------------------------------------------------------


class QueryEvent(Event):
    """A statement. ``status`` (the status variables: sql_mode, charset, ...) is parsed from the
    event's bytes on first access: most QUERY events are BEGINs nobody asks that of."""

    __slots__ = ("thread_id", "exec_time", "schema", "error_code", "_status", "_status_raw",
                 "query")
    _fields = ("schema", "query")

    @property
    def status(self) -> dict:
        if self._status is None:
            try:
                self._status = parse_status_vars(self._status_raw)
            except (IndexError, ValueError, struct.error) as e:
                raise TruncatedEventError(f"QUERY status variables are malformed: {e}",
                                          file=self.file, position=self.pos) from None
        return self._status

    @property
    def is_begin(self) -> bool:
        return self.query in ("BEGIN", "XA START") or self.query.startswith("XA START")

    @property
    def is_commit(self) -> bool:
        q = self.query
        return q == "COMMIT" or q.startswith("XA COMMIT") or q.startswith("XA END")

    @property
    def is_rollback(self) -> bool:
        return self.query.startswith("ROLLBACK") and " TO " not in self.query.upper()


class ExecuteLoadQueryEvent(QueryEvent):
    __slots__ = ("file_id", "start_pos", "end_pos_in_query", "dup_handling")
    _fields = ("schema", "query", "file_id")


_STATUS_FIXED = {0: 4, 1: 8, 3: 4, 4: 6, 7: 2, 8: 2, 9: 8, 10: 4, 13: 3, 14: 8, 16: 1, 17: 8,
                 18: 2, 19: 1, 20: 1, 128: 3, 129: 8, 130: 1}
_STATUS_NAMES = {0: "flags2", 1: "sql_mode", 2: "catalog", 3: "auto_increment", 4: "charset",
                 5: "time_zone", 6: "catalog", 7: "lc_time_names", 8: "charset_database",
                 9: "table_map_for_update", 10: "master_data_written", 11: "invoker",
                 12: "updated_db_names", 13: "microseconds", 14: "commit_ts",
                 16: "explicit_defaults_for_timestamp", 17: "ddl_xid",
                 18: "default_collation_for_utf8mb4", 19: "sql_require_primary_key",
                 20: "default_table_encryption", 128: "hrnow", 129: "xid", 130: "gtid_flags3",
                 131: "character_set_collations"}


def parse_status_vars(raw: bytes) -> dict:
    """QUERY status variables; parsing stops (keeping what it has) at a code it does not know."""
    out: dict = {}
    p, end = 0, len(raw)
    while p < end:
        code = raw[p]
        p += 1
        name = _STATUS_NAMES.get(code)
        if code in _STATUS_FIXED:
            n = _STATUS_FIXED[code]
            val = raw[p:p + n]
            p += n
            if code == 4:
                val = struct.unpack("<HHH", val)
            elif code in (0, 1, 3, 7, 8, 10, 13, 17, 18, 129, 128):
                val = int.from_bytes(val, "little")
            out[name] = val
        elif code in (5, 6):
            n = raw[p]
            out[name] = raw[p + 1:p + 1 + n].decode("utf-8", "replace")
            p += 1 + n
        elif code == 2:
            n = raw[p]
            out[name] = raw[p + 1:p + 1 + n].decode("utf-8", "replace")
            p += 2 + n
        elif code == 11:
            n = raw[p]
            user = raw[p + 1:p + 1 + n]
            p += 1 + n
            m = raw[p]
            host = raw[p + 1:p + 1 + m]
            p += 1 + m
            out[name] = (user.decode("utf-8", "replace"), host.decode("utf-8", "replace"))
        elif code == 12:
            count = raw[p]
            p += 1
            dbs = []
            if count != 254:
                for _ in range(count):
                    z = raw.index(b"\0", p)
                    dbs.append(raw[p:z].decode("utf-8", "replace"))
                    p = z + 1
            out[name] = dbs
        elif code == 131:
            count = raw[p]
            out[name] = raw[p + 1:p + 1 + 4 * count]
            p += 1 + 4 * count
        else:
            out["unparsed"] = raw[p - 1:]
            break
    return out


def maria_uncompress(data) -> bytes:
    """MariaDB's compressed-event payload: header byte, big-endian length, zlib stream."""
    if not data:
        raise CompressionError("compressed event has no payload")
    hdr = data[0]
    lenlen = hdr & 0x07
    if not hdr & 0x80 or (hdr >> 4) & 0x07 or lenlen == 0:
        raise CompressionError(f"unknown MariaDB compression header 0x{hdr:02x}")
    expected = int.from_bytes(data[1:1 + lenlen], "big")
    try:
        out = zlib.decompress(bytes(data[1 + lenlen:]))
    except zlib.error as e:
        raise CompressionError(f"MariaDB compressed event does not inflate: {e}") from None
    if len(out) != expected:
        raise CompressionError(f"MariaDB compressed event inflates to {len(out)} bytes, header "
                               f"says {expected}")
    return out


_QUERY_HEAD = struct.Struct("<IIBHH").unpack_from


@register(EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED, EventType.EXECUTE_LOAD_QUERY)
def _query(h, body, ctx):
    t = h[1]
    load = t == EventType.EXECUTE_LOAD_QUERY
    ev = _new_event(ExecuteLoadQueryEvent if load else QueryEvent)
    ev.header = h
    ev.thread_id, ev.exec_time, schema_len, ev.error_code, status_len = _QUERY_HEAD(body, 0)
    phl = ctx.post_header_len(t, 26 if load else 13)
    if load:
        ev.file_id, ev.start_pos, ev.end_pos_in_query = struct.unpack_from("<III", body, 13)
        ev.dup_handling = body[25]
    p = phl
    ev._status = None
    ev._status_raw = bytes(body[p:p + status_len])
    p += status_len
    ev.schema = bytes(body[p:p + schema_len]).decode("utf-8", "replace")
    p += schema_len + 1
    q = body[p:]
    if t == EventType.MARIA_QUERY_COMPRESSED:
        q = maria_uncompress(q)
    ev.query = bytes(q).decode("utf-8", "surrogateescape")
    return ev


# --- tables and rows -------------------------------------------------------------------------------


class TableMapEvent(Event):
    __slots__ = ("table",)
    _fields = ("table",)

    @property
    def table_id(self) -> int:
        return self.table.table_id


@register(EventType.TABLE_MAP)
def _table_map(h, body, ctx):
    key = bytes(body)
    tmap = ctx._tmap_cache.get(key)
    if tmap is None:
        tmap = decode_table_map(body, ctx.post_header_len(EventType.TABLE_MAP, 8), ctx.is_mariadb)
        if len(ctx._tmap_cache) > 4096:
            ctx._tmap_cache.clear()
        ctx._tmap_cache[key] = tmap
    ctx.tables[tmap.table_id] = tmap
    ev = _new_event(TableMapEvent)
    ev.header = h
    ev.table = tmap
    return ev


class RowsEvent(Event):
    """WRITE/UPDATE/DELETE rows. ``kind`` is "insert", "update" or "delete".

    ``rows`` (decoded on first access) is a list of value tuples for inserts/deletes and of
    (before, after) tuple pairs for updates; tuples follow the table's column order and hold
    :data:`cdc.values.types.ABSENT` for columns outside the image.
    """

    __slots__ = ("kind", "table_id", "flags", "table", "extra", "_data", "_start", "_present",
                 "_present_after", "_rows", "partial")
    _fields = ("kind", "table_id", "table_name", "row_count")

    @property
    def table_name(self) -> str | None:
        return self.table.qualified_name if self.table else None

    @property
    def rows(self) -> list:
        if self._rows is None:
            if self.table is None:
                raise SchemaError(
                    f"rows event for table id {self.table_id} has no TABLE_MAP before it; start "
                    f"reading at a transaction boundary (a GTID/BEGIN event), not mid-transaction",
                )
            self._rows = decode_images(self.table, self.kind, self._data, self._start,
                                       self._present, self._present_after, self.partial)
        return self._rows

    def decode_rows(self) -> list:
        """The rows, as :attr:`rows`, decoded afresh and not kept on the event: a consumer that
        walks a large transaction once holds one event's decoded rows at a time."""
        if self._rows is not None:
            return self._rows
        if self.table is None:
            return self.rows   # raises the SchemaError
        return decode_images(self.table, self.kind, self._data, self._start, self._present,
                             self._present_after, self.partial)

    @property
    def row_count(self) -> int:
        return len(self.rows) if self.table is not None else -1

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & 1)


_MARIA_COMPRESSED_ROWS = {EventType.MARIA_WRITE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_DELETE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_WRITE_ROWS_COMPRESSED,
                          EventType.MARIA_UPDATE_ROWS_COMPRESSED,
                          EventType.MARIA_DELETE_ROWS_COMPRESSED}
_V2_ROWS = {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS,
            EventType.PARTIAL_UPDATE_ROWS, EventType.MARIA_WRITE_ROWS_COMPRESSED,
            EventType.MARIA_UPDATE_ROWS_COMPRESSED, EventType.MARIA_DELETE_ROWS_COMPRESSED}


_ROWS_DECODED = (WRITE_TYPES | UPDATE_TYPES | DELETE_TYPES) - {
    EventType.PRE_GA_WRITE_ROWS, EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS}
# type code -> (kind, partial, post-header length when the FDE does not say, compressed)
_ROWS_SPEC = {t: ("insert" if t in WRITE_TYPES else "update" if t in UPDATE_TYPES else "delete",
                  t == EventType.PARTIAL_UPDATE_ROWS,
                  10 if t in _V2_ROWS and t not in _MARIA_COMPRESSED_ROWS else 8,
                  t in _MARIA_COMPRESSED_ROWS)
              for t in _ROWS_DECODED}


@register(*_ROWS_DECODED)
def _rows(h, body, ctx):
    t = h[1]
    kind, partial, default_phl, compressed = _ROWS_SPEC[t]
    ev = _new_event(RowsEvent)
    ev.header = h
    ev.kind = kind
    ev.partial = partial
    fde = ctx.fde
    phl = fde.post_header_lengths[t - 1] if fde is not None and t <= len(
        fde.post_header_lengths) else default_phl
    if phl == 6:
        ev.table_id = int.from_bytes(body[0:4], "little")
        ev.flags = int.from_bytes(body[4:6], "little")
    else:
        ev.table_id = int.from_bytes(body[0:6], "little")
        ev.flags = int.from_bytes(body[6:8], "little")
    p = phl
    ev.extra = None
    if phl == 10:
        extra_len = int.from_bytes(body[8:10], "little")
        if extra_len > 2:
            ev.extra = bytes(body[10:10 + extra_len - 2])
        p = 8 + extra_len
    ncols = body[p]
    if ncols < 251:
        p += 1
    else:
        ncols, p = read_lenenc(body, p)
    nbytes = (ncols + 7) >> 3
    ev._present = present_columns(bytes(body[p:p + nbytes]), ncols)
    p += nbytes
    if kind == "update":
        ev._present_after = present_columns(bytes(body[p:p + nbytes]), ncols)
        p += nbytes
    else:
        ev._present_after = None
    if p > len(body):
        raise TruncatedEventError("rows event header runs past the end of the event")
    data = body[p:]
    if compressed:
        data = maria_uncompress(data)
    ev._data = bytes(data)
    ev._start = 0
    ev._rows = None
    # Table maps stay valid until the end of the transaction (the STMT_END flag does not drop them).
    tmap = ev.table = ctx.tables.get(ev.table_id)
    if tmap is not None and len(tmap.columns) != ncols:
        raise SchemaError(
            f"rows event for {tmap.qualified_name} has {ncols} columns but its TABLE_MAP has "
            f"{len(tmap.columns)}; the binlog is inconsistent")
    return ev


# --- GTIDs ---------------------------------------------------------------------------------------


class GtidEvent(Event):
    """MySQL GTID (33), ANONYMOUS_GTID (34) and GTID_TAGGED (42): starts a transaction.
    ``gtid`` is the text ``uuid[:tag]:gno`` (None for anonymous); ``info``
    (:class:`cdc.binlog.gtid.MysqlGtidInfo`, all fields) is built on first access from the fields
    read -- and checked -- while parsing."""

    __slots__ = ("gtid", "_info", "_parsed")
    _fields = ("gtid", "last_committed", "sequence_number")

    @property
    def info(self):
        if self._info is None:
            self._info = mysql_gtid_info(self._parsed)
        return self._info

    @property
    def last_committed(self):
        return self.info.last_committed

    @property
    def sequence_number(self):
        return self.info.sequence_number

    @property
    def commit_timestamp_us(self):
        return self.info.immediate_commit_ts_us


@register(EventType.GTID, EventType.ANONYMOUS_GTID)
def _gtid(h, body, ctx):
    ev = _new_event(GtidEvent)
    ev.header = h
    parsed = parse_mysql_gtid_body(body, anonymous=h[1] == EventType.ANONYMOUS_GTID)
    ev._parsed = parsed
    ev._info = None
    ev.gtid = mysql_gtid_text(parsed)
    return ev


@register(EventType.GTID_TAGGED)
def _gtid_tagged(h, body, ctx):
    from cdc.binlog.gtid import decode_mysql_gtid_tagged_body
    ev = _new_event(GtidEvent)
    ev.header = h
    info = ev._info = decode_mysql_gtid_tagged_body(body)
    ev._parsed = None
    ev.gtid = info.gtid
    return ev


class PreviousGtidsEvent(Event):
    __slots__ = ("gtid_set",)
    _fields = ("gtid_set",)


@register(EventType.PREVIOUS_GTIDS)
def _previous_gtids(h, body, ctx):
    from cdc.binlog.gtid import decode_previous_gtids_body
    ev = PreviousGtidsEvent(h)
    ev.gtid_set = decode_previous_gtids_body(body)
    return ev


class MariaGtidEvent(Event):
    """MariaDB GTID (162): starts a transaction (or a standalone DDL when ``standalone``).

    ``gtid`` and ``standalone`` are read at once; ``info`` (every field,
    :class:`cdc.binlog.gtid.MariaGtidInfo`) is decoded on first access when nothing in the body could
    fail to decode (no XA data, no extra flags), else at once so that a malformed body raises
    while parsing.
    """

    __slots__ = ("gtid", "standalone", "_info", "_body")
    _fields = ("gtid", "standalone")

    @property
    def info(self):
        if self._info is None:
            self._info = decode_maria_gtid_body(self._body, self.header.server_id)
        return self._info


_MARIA_GTID_HEAD = struct.Struct("<QIB").unpack_from
_MARIA_GTID_FLAGS_LAZY = 0x3F   # STANDALONE .. DDL: no field but commit_id depends on them


@register(EventType.MARIA_GTID)
def _maria_gtid(h, body, ctx):
    ev = _new_event(MariaGtidEvent)
    ev.header = h
    n = len(body)
    if n >= 13:
        seq_no, domain_id, flags = _MARIA_GTID_HEAD(body, 0)
        extra_at = 21 if flags & 2 else 13   # after commit_id (FL_GROUP_COMMIT_ID)
        if not flags & ~_MARIA_GTID_FLAGS_LAZY and n >= extra_at and (n == extra_at or
                                                                       not body[extra_at]):
            ev.gtid = _new_tuple(MariaGtid, (domain_id, h[2], seq_no))
            ev.standalone = bool(flags & 1)
            ev._info = None
            ev._body = bytes(body)
            return ev
    info = decode_maria_gtid_body(body, h.server_id)
    ev._info = info
    ev._body = None
    ev.gtid = info.gtid
    ev.standalone = info.standalone
    return ev


class MariaGtidListEvent(Event):
    __slots__ = ("gtids",)
    _fields = ("gtids",)


@register(EventType.MARIA_GTID_LIST)
def _maria_gtid_list(h, body, ctx):
    from cdc.binlog.gtid import decode_maria_gtid_list_body
    ev = MariaGtidListEvent(h)
    ev.gtids = decode_maria_gtid_list_body(body)
    return ev


# --- MySQL group replication / XA ----------------------------------------------------------------


class TransactionContextEvent(Event):
    __slots__ = ("server_uuid", "thread_id", "gtid_specified", "body")
    _fields = ("server_uuid", "thread_id")


@register(EventType.TRANSACTION_CONTEXT)
def _trx_context(h, body, ctx):
    ev = TransactionContextEvent(h)
    n = body[0]
    ev.thread_id = int.from_bytes(body[1:5], "little")
    ev.gtid_specified = bool(body[5])
    ev.server_uuid = bytes(body[14:14 + n]).decode("ascii", "replace")
    ev.body = bytes(body)
    return ev


class ViewChangeEvent(Event):
    __slots__ = ("view_id", "seq_number", "body")
    _fields = ("view_id", "seq_number")


@register(EventType.VIEW_CHANGE)
def _view_change(h, body, ctx):
    ev = ViewChangeEvent(h)
    ev.view_id = bytes(body[0:40]).split(b"\0", 1)[0].decode("ascii", "replace")
    ev.seq_number = int.from_bytes(body[40:48], "little")
    ev.body = bytes(body)
    return ev


class XaPrepareEvent(Event):
    __slots__ = ("one_phase", "format_id", "gtrid", "bqual")
    _fields = ("one_phase", "format_id", "gtrid", "bqual")


@register(EventType.XA_PREPARE)
def _xa_prepare(h, body, ctx):
    ev = XaPrepareEvent(h)
    ev.one_phase = bool(body[0])
    ev.format_id, glen, blen = struct.unpack_from("<iII", body, 1)
    ev.gtrid = bytes(body[13:13 + glen])
    ev.bqual = bytes(body[13 + glen:13 + glen + blen])
    return ev


# --- TRANSACTION_PAYLOAD (MySQL 8.0.20+ binlog_transaction_compression) ---------------------------


class TransactionPayloadEvent(Event):
    """A compressed transaction; the parser yields the inner events right after this one."""

    __slots__ = ("compression", "payload_size", "uncompressed_size", "payload")
    _fields = ("compression", "payload_size", "uncompressed_size")
    ZSTD, NONE = 0, 255

    def uncompressed(self) -> bytes:
        if self.compression == self.NONE:
            return self.payload
        if self.compression != self.ZSTD:
            raise CompressionError(f"TRANSACTION_PAYLOAD uses unknown compression type "
                                   f"{self.compression}")
        import zstandard
        try:
            dobj = zstandard.ZstdDecompressor().decompressobj()
            out = dobj.decompress(self.payload)
        except zstandard.ZstdError as e:
            raise CompressionError(f"TRANSACTION_PAYLOAD does not decompress: {e}") from None
        if self.uncompressed_size is not None and len(out) != self.uncompressed_size:
            raise CompressionError(
                f"TRANSACTION_PAYLOAD decompresses to {len(out)} bytes, header says "
                f"{self.uncompressed_size}")
        return out


@register(EventType.TRANSACTION_PAYLOAD)
def _payload(h, body, ctx):
    ev = TransactionPayloadEvent(h)
    fields, p = _tlv_fields(body)
    ev.payload_size = read_lenenc(fields[1], 0)[0] if 1 in fields else len(body) - p
    ev.compression = read_lenenc(fields[2], 0)[0] if 2 in fields else 0
    ev.uncompressed_size = read_lenenc(fields[3], 0)[0] if 3 in fields else None
    ev.payload = bytes(body[p:p + ev.payload_size])
    if len(ev.payload) != ev.payload_size:
        raise TruncatedEventError("TRANSACTION_PAYLOAD is shorter than its payload size")
    return ev
