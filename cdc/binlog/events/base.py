"""What every event module shares: the common header, the Event base class, the format
description, the parser's Context, and the one event registry (type code -> body decoder).

Each decoder gets the event *body* (bytes after the common header, checksum removed) and the
parser context (format description, table maps, row decoder), and returns an :class:`Event`.
Unknown event types, and obsolete ones, come out as :class:`RawEvent` -- never dropped.
"""

from __future__ import annotations

import struct
from typing import Callable, NamedTuple

from cdc.binlog.constants import ChecksumAlg, EventFlag, EventType
from cdc.binlog.tablemap import TableMap
from cdc.errors import UnsupportedBinlogVersionError
from cdc.rows.backend import resolve_decoder


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
        raise UnsupportedBinlogVersionError(
            f"FORMAT_DESCRIPTION_EVENT says binlog version {ev.binlog_version}; only v4 (MySQL 5.0+) "
            f"is decoded")
    return ev


class Context:
    """What the parser knows while decoding: the format description, checksum, table maps, the
    row decoder its rows events decode with (``"c"``, ``"python"``, or None: the process
    default of :mod:`cdc.rows.backend`) and the collation of text columns without charset
    metadata.

    ``table_map_cache`` (TABLE_MAP body -> :class:`~cdc.binlog.tablemap.TableMap`) lets a table
    map logged again with every transaction keep its decoding plans.
    """

    def __init__(self, checksum: ChecksumAlg | None = None, row_decoder: str | None = None,
                 default_collation: int | None = None):
        self.fde: FormatDescriptionEvent | None = None
        #: given to text columns of a table map that carries no charset (None: left unset)
        self.default_collation = default_collation
        self.checksum = checksum
        self.tables: dict[int, TableMap] = {}
        self.table_map_cache: dict[bytes, TableMap] = {}
        self.file: str | None = None
        self.row_decoder = resolve_decoder(row_decoder)

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
new_event = object.__new__
new_tuple = tuple.__new__
REGISTRY: dict[int, Decode] = {}
"""The one event registry: type code -> body decoder (``decoder(header, body, ctx)``)."""


def register(*type_codes: int):
    """Decorator: *fn* decodes the bodies of events of these type codes (each only once)."""
    def deco(fn):
        for t in type_codes:
            if t in REGISTRY:
                raise RuntimeError(f"event type {t} registered twice")
            REGISTRY[t] = fn
        return fn
    return deco


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
