"""Transaction-starting and GTID-state events: MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED and
PREVIOUS_GTIDS, MariaDB GTID and GTID_LIST.  The bodies are decoded by :mod:`cdc.binlog.gtid`.
"""

from __future__ import annotations

import struct

from cdc.binlog.constants import EventType
from cdc.binlog.events.base import Event, new_event, new_tuple, register
from cdc.binlog.gtid import (MariaGtid, decode_maria_gtid_body, decode_maria_gtid_list_body,
                             decode_mysql_gtid_tagged_body, decode_previous_gtids_body,
                             mysql_gtid_info, mysql_gtid_text, parse_mysql_gtid_body)


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
    ev = new_event(GtidEvent)
    ev.header = h
    parsed = parse_mysql_gtid_body(body, anonymous=h[1] == EventType.ANONYMOUS_GTID)
    ev._parsed = parsed
    ev._info = None
    ev.gtid = mysql_gtid_text(parsed)
    return ev


@register(EventType.GTID_TAGGED)
def _gtid_tagged(h, body, ctx):
    ev = new_event(GtidEvent)
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
    ev = new_event(MariaGtidEvent)
    ev.header = h
    n = len(body)
    if n >= 13:
        seq_no, domain_id, flags = _MARIA_GTID_HEAD(body, 0)
        extra_at = 21 if flags & 2 else 13   # after commit_id (FL_GROUP_COMMIT_ID)
        if not flags & ~_MARIA_GTID_FLAGS_LAZY and n >= extra_at and (n == extra_at or
                                                                       not body[extra_at]):
            ev.gtid = new_tuple(MariaGtid, (domain_id, h[2], seq_no))
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
    ev = MariaGtidListEvent(h)
    ev.gtids = decode_maria_gtid_list_body(body)
    return ev
