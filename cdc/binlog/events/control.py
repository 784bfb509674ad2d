"""Control and statement-side events: ROTATE, STOP, XID, INTVAR, RAND, USER_VAR, INCIDENT,
HEARTBEAT, ROWS_QUERY/ANNOTATE_ROWS, MariaDB's BINLOG_CHECKPOINT and START_ENCRYPTION, LOAD DATA
blocks, and MySQL's group replication / XA events.

(FORMAT_DESCRIPTION is in :mod:`cdc.binlog.events.base`, QUERY in
:mod:`cdc.binlog.events.query`, TRANSACTION_PAYLOAD in :mod:`cdc.binlog.events.payload`.)
"""

from __future__ import annotations

import struct

from cdc.binlog.constants import EventFlag, EventType
from cdc.binlog.events.base import Event, new_event, register
from cdc.binlog.events.payload import tlv_fields
from cdc.binlog.wire import read_lenenc
from cdc.errors import EncryptedBinlogError, TruncatedEventError
from cdc.values.decimal import read_newdecimal


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
    ev = new_event(XidEvent)
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


@register(EventType.HEARTBEAT_V2)
def _heartbeat_v2(h, body, ctx):
    ev = HeartbeatEvent(h)
    fields, _ = tlv_fields(body)
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
    ev = new_event(RowsQueryEvent)
    ev.header = h
    ev._query = None
    ev._raw = bytes(body[1:])
    return ev


@register(EventType.MARIA_ANNOTATE_ROWS)
def _annotate_rows(h, body, ctx):
    ev = new_event(RowsQueryEvent)
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
