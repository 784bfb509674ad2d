"""Replication commands of the MySQL client/server protocol.

Payload layouts (integers little-endian; the 4-byte packet header is added by
:func:`cdc.replica.packets.frame`):

``COM_REGISTER_SLAVE`` (0x15)
    command 1, server_id 4, hostname (1-byte length + bytes), user (1 + n), password (1 + n),
    port 2, replication_rank 4, master_id 4.

``COM_BINLOG_DUMP`` (0x12)
    command 1, binlog_pos 4, flags 2 (``BINLOG_DUMP_NON_BLOCK`` = 1), server_id 4, file name
    (the rest of the packet, no terminator). MariaDB GTID mode sends it with an empty name after
    ``SET @slave_connect_state``.

``COM_BINLOG_DUMP_GTID`` (0x1e, MySQL)
    command 1, flags 2 (``BINLOG_THROUGH_GTID`` = 4 says GTID data follows), server_id 4,
    file name length 4, file name, binlog_pos 8, GTID data size 4, GTID data
    (``Gtid_set::encode``: :meth:`cdc.binlog.gtid.GtidSet.to_bytes`).

After either dump command the server streams one event per packet: ``0x00`` then the event,
``0xff`` ERR, or ``0xfe`` EOF (non-blocking mode, end of the binlog).
"""

from __future__ import annotations

import struct

from cdc.errors import ConfigurationError
from cdc.replica.server import ServerInfo

COM_QUIT = 0x01
COM_QUERY = 0x03
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02   # MariaDB: send ANNOTATE_ROWS events
BINLOG_THROUGH_POSITION = 0x02           # MySQL COM_BINLOG_DUMP_GTID
BINLOG_THROUGH_GTID = 0x04               # MySQL COM_BINLOG_DUMP_GTID: GTID data follows

MARIA_SLAVE_CAPABILITY_GTID = 4          # @mariadb_slave_capability: GTID events, GTID dump

MAX_HEARTBEAT_SECONDS = 4294967          # the servers' documented ceiling for the period


def _short_string(value: str | bytes, what: str) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(raw) > 255:
        raise ConfigurationError(f"COM_REGISTER_SLAVE {what} is {len(raw)} bytes; at most 255")
    return bytes((len(raw),)) + raw


def _check_u32(value: int, what: str) -> int:
    if not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise ConfigurationError(f"{what} must be an integer from 0 to 4294967295, not {value!r}")
    return value


def register_slave(server_id: int, *, host: str = "", user: str = "", password: str = "",
                   port: int = 0, rank: int = 0, master_id: int = 0) -> bytes:
    """The COM_REGISTER_SLAVE payload (what ``SHOW SLAVE HOSTS``/``SHOW REPLICAS`` then shows)."""
    return (bytes((COM_REGISTER_SLAVE,)) + struct.pack("<I", _check_u32(server_id, "server_id"))
            + _short_string(host, "host") + _short_string(user, "user")
            + _short_string(password, "password") + struct.pack("<HII", port & 0xFFFF, rank,
                                                                 master_id))


def binlog_dump(file: str, pos: int, server_id: int, *, flags: int = 0) -> bytes:
    """The COM_BINLOG_DUMP payload."""
    if not 0 <= pos < 1 << 32:
        raise ConfigurationError(f"binlog position {pos} does not fit COM_BINLOG_DUMP's 4 bytes")
    return (bytes((COM_BINLOG_DUMP,)) + struct.pack("<IHI", pos, flags,
                                                    _check_u32(server_id, "server_id"))
            + file.encode("utf-8"))


def binlog_dump_gtid(gtid_data: bytes, server_id: int, *, flags: int = 0, file: str = "",
                     pos: int = 4) -> bytes:
    """The COM_BINLOG_DUMP_GTID payload; *gtid_data* is ``GtidSet.to_bytes()``.
    ``BINLOG_THROUGH_GTID`` is always set (the GTID data is always sent)."""
    name = file.encode("utf-8")
    flags |= BINLOG_THROUGH_GTID
    return (bytes((COM_BINLOG_DUMP_GTID,)) + struct.pack("<HII", flags,
                                                         _check_u32(server_id, "server_id"),
                                                         len(name))
            + name + struct.pack("<QI", pos, len(gtid_data)) + gtid_data)


def dump_flags(info: ServerInfo, variables: dict, *, blocking: bool) -> int:
    """The flags of the dump command: ``BINLOG_DUMP_NON_BLOCK`` unless *blocking*; on a MariaDB
    that writes its transactions' events with end_log_pos 0 (11.4+, ``binlog_legacy_event_pos``
    OFF, its default) ``BINLOG_SEND_ANNOTATE_ROWS_EVENT`` too: without those events the stream
    has holes where they lie, and the events after them could not be placed in the file."""
    flags = 0 if blocking else BINLOG_DUMP_NON_BLOCK
    legacy = variables.get("binlog_legacy_event_pos")
    if info.is_mariadb and legacy is not None and str(legacy).upper() not in ("ON", "1"):
        flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT
    return flags


def heartbeat_period_ns(seconds: float) -> int:
    """``@master_heartbeat_period`` is in nanoseconds; 0 < period <= 4294967 s."""
    if not seconds or seconds <= 0:
        raise ConfigurationError(f"heartbeat interval must be a positive number of seconds, not "
                                 f"{seconds!r}")
    if seconds > MAX_HEARTBEAT_SECONDS:
        raise ConfigurationError(f"heartbeat interval {seconds} s exceeds the servers' limit of "
                                 f"{MAX_HEARTBEAT_SECONDS} s")
    return int(round(seconds * 1_000_000_000))
