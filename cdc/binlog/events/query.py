"""QUERY events (and MariaDB's compressed QUERY, EXECUTE_LOAD_QUERY): statements, with their
status variables parsed on demand."""

from __future__ import annotations

import struct

from cdc.binlog.constants import EventType
from cdc.binlog.events.base import Event, new_event, register
from cdc.binlog.events.payload import maria_uncompress
from cdc.errors import TruncatedEventError
from cdc.values.charsets import codec_of


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


_QUERY_HEAD = struct.Struct("<IIBHH").unpack_from


@register(EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED, EventType.EXECUTE_LOAD_QUERY)
def _query(h, body, ctx):
    t = h[1]
    load = t == EventType.EXECUTE_LOAD_QUERY
    ev = new_event(ExecuteLoadQueryEvent if load else QueryEvent)
    ev.header = h
    ev.thread_id, ev.exec_time, schema_len, ev.error_code, status_len = _QUERY_HEAD(body, 0)
    phl = ctx.post_header_len(t, 26 if load else 13)
    if load:
        ev.file_id, ev.start_pos, ev.end_pos_in_query = struct.unpack_from("<III", body, 13)
        ev.dup_handling = body[25]
    p = phl
    if p + status_len + schema_len + 1 > len(body):
        raise TruncatedEventError(
            f"QUERY event of {len(body)} body bytes: its status variables ({status_len} bytes) "
            f"and schema name ({schema_len} bytes) run past its end; the binlog is corrupt")
    ev._status = None
    ev._status_raw = bytes(body[p:p + status_len])
    p += status_len
    ev.schema = bytes(body[p:p + schema_len]).decode("utf-8", "replace")
    p += schema_len + 1
    q = bytes(body[p:])
    if t == EventType.MARIA_QUERY_COMPRESSED:
        q = bytes(maria_uncompress(q))
    if q.isascii():     # BEGIN, COMMIT, most DDL: the same in every client character set
        ev.query = q.decode("ascii")
    else:
        ev.query = q.decode(_client_codec(ev), "surrogateescape")
    return ev


def _client_codec(ev: QueryEvent) -> str:
    """The Python codec of the statement's client character set (Q_CHARSET_CODE), UTF-8 when
    the event does not say (or the status variables do not parse)."""
    try:
        charset = parse_status_vars(ev._status_raw).get("charset")
    except (IndexError, ValueError, struct.error):
        return "utf-8"      # ev.status raises the error with the event's position
    codec = codec_of(charset[0]) if charset else None
    return codec if codec not in (None, "utf-8?") else "utf-8"
