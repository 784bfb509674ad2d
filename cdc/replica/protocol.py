"""Replication commands of the MySQL client/server protocol, and what server errors mean.

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

import re
import struct
from typing import NamedTuple

from cdc.errors import (AuthenticationError, BinlogPurgedError, CdcError, ConfigurationError,
                     PrivilegeError, ReplicationError, ServerConfigError, ServerConnectionError,
                     ServerIdConflictError)

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


def heartbeat_period_ns(seconds: float) -> int:
    """``@master_heartbeat_period`` is in nanoseconds; 0 < period <= 4294967 s."""
    if not seconds or seconds <= 0:
        raise ConfigurationError(f"heartbeat interval must be a positive number of seconds, not "
                                 f"{seconds!r}")
    if seconds > MAX_HEARTBEAT_SECONDS:
        raise ConfigurationError(f"heartbeat interval {seconds} s exceeds the servers' limit of "
                                 f"{MAX_HEARTBEAT_SECONDS} s")
    return int(round(seconds * 1_000_000_000))


# --- server flavour ------------------------------------------------------------------------------


class ServerInfo(NamedTuple):
    version_text: str
    is_mariadb: bool
    version: tuple[int, int, int]

    @property
    def flavor(self) -> str:
        return "MariaDB" if self.is_mariadb else "MySQL"


def parse_server_version(text: str) -> ServerInfo:
    """``'5.5.5-10.11.6-MariaDB-log'`` (MariaDB's handshake prefix), ``'10.11.6-MariaDB'`` or
    ``'8.4.0'``."""
    is_maria = "mariadb" in text.lower()
    body = text[6:] if is_maria and text.startswith("5.5.5-") else text
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", body)
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)
    return ServerInfo(text, is_maria, version)


def grant_statement(info: ServerInfo, account: str) -> str:
    """The GRANT a CDC replica account needs, in the server's vocabulary."""
    if info.is_mariadb and info.version >= (10, 5, 2):
        privs = "REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN"
    else:
        privs = "REPLICATION SLAVE, REPLICATION CLIENT"
    return f"GRANT {privs} ON *.* TO {account};"


def quote_account(current_user: str) -> str:
    """``'cdc@%'`` (CURRENT_USER()) -> ``'cdc'@'%'``."""
    user, _, host = current_user.rpartition("@")
    if not user:
        user, host = current_user, "%"
    return f"'{user}'@'{host}'"


_PRIV_SLAVE = ("REPLICATION SLAVE", "REPLICATION REPLICA", "ALL PRIVILEGES")
_PRIV_CLIENT = ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", "ALL PRIVILEGES")


def missing_privileges(grants: list[str]) -> list[str] | None:
    """From ``SHOW GRANTS`` lines: the missing replication privileges ([] when all present), or
    None when it cannot tell (roles are granted, and their privileges are not listed)."""
    global_privs: set[str] = set()
    roles = False
    for line in grants:
        m = re.match(r"\s*GRANT\s+(.*?)\s+ON\s+\*\.\*\s+TO\s", line, re.I | re.S)
        if m:
            global_privs.update(p.strip().upper() for p in m.group(1).split(","))
        elif re.match(r"\s*GRANT\s+[`'\"]?[^ ]+\s+TO\s", line, re.I) and " ON " not in line.upper():
            roles = True
    missing = []
    if not global_privs & set(_PRIV_SLAVE):
        missing.append("REPLICATION SLAVE")
    if not global_privs & set(_PRIV_CLIENT):
        missing.append("REPLICATION CLIENT")
    if missing and roles:
        return None
    return missing


# --- server errors --------------------------------------------------------------------------------

ER_DBACCESS_DENIED = 1044
ER_ACCESS_DENIED = 1045
ER_SERVER_SHUTDOWN = 1053
ER_HOST_IS_BLOCKED = 1129
ER_HOST_NOT_PRIVILEGED = 1130
ER_TOO_MANY_CONNECTIONS = 1040
ER_CON_COUNT = 1040
ER_NET_READ_ERROR = 1158
ER_NET_READ_INTERRUPTED = 1159
ER_NET_ERROR_ON_WRITE = 1160
ER_NET_WRITE_INTERRUPTED = 1161
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_NOT_SUPPORTED_AUTH_MODE = 1251
ER_QUERY_INTERRUPTED = 1317
ER_ACCESS_DENIED_NO_PASSWORD = 1698
ER_CONNECTION_KILLED = 1927          # MariaDB
ER_MUST_CHANGE_PASSWORD = 1820
ER_ACCOUNT_LOCKED = 3118
CR_CONN_HOST_ERROR = 2003
CR_SERVER_GONE = 2006
CR_SERVER_LOST = 2013
CR_AUTH_PLUGIN_CANNOT_LOAD = 2059

#: Errors after which reconnecting may succeed (the server went away, restarted, was busy, or
#: the connection was killed).
TRANSIENT_CODES = frozenset({
    ER_SERVER_SHUTDOWN, ER_TOO_MANY_CONNECTIONS, ER_NET_READ_ERROR, ER_NET_READ_INTERRUPTED,
    ER_NET_ERROR_ON_WRITE, ER_NET_WRITE_INTERRUPTED, ER_QUERY_INTERRUPTED, ER_CONNECTION_KILLED,
    CR_CONN_HOST_ERROR, CR_SERVER_GONE, CR_SERVER_LOST, 2002, 2005, 2012, 2055,
    1205, 1213,  # lock wait timeout / deadlock (pre-flight queries)
    4031,        # MySQL: the client was disconnected by the server because of inactivity
})

_PURGED = re.compile(r"purged|could not find first log file|could not find gtid state|"
                     r"not found in binlog index|log file .* not found", re.I)


class TransientServerError(ServerConnectionError):
    """A server error after which the client reconnects (shutdown, killed connection...)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


def map_server_error(code: int, message: str, *, user: str | None = None,
                     where: str | None = None, start: str | None = None,
                     grant: str | None = None) -> CdcError:
    """The binlog-cdc error for a server error (from PyMySQL or an ERR packet in the dump).

    :param where: ``host:port`` for messages; :param start: what was asked for (``"file
        mysql-bin.000003 position 4"``, ``"GTID set ..."``); :param grant: the GRANT to suggest.
    """
    at = f" ({where})" if where else ""
    srv = f"server error {code}: {message}"
    if code in (ER_ACCESS_DENIED, ER_ACCESS_DENIED_NO_PASSWORD, ER_NOT_SUPPORTED_AUTH_MODE,
                CR_AUTH_PLUGIN_CANNOT_LOAD, ER_HOST_NOT_PRIVILEGED, ER_ACCOUNT_LOCKED,
                ER_MUST_CHANGE_PASSWORD):
        hint = {
            ER_NOT_SUPPORTED_AUTH_MODE: "the account's authentication plugin is not supported "
                                        "by the client",
            CR_AUTH_PLUGIN_CANNOT_LOAD: "the account's authentication plugin is not supported "
                                        "by the client",
            ER_HOST_NOT_PRIVILEGED: "the account may not connect from this host",
            ER_ACCOUNT_LOCKED: "the account is locked (ALTER USER ... ACCOUNT UNLOCK)",
            ER_MUST_CHANGE_PASSWORD: "the account's password has expired (ALTER USER ... "
                                     "IDENTIFIED BY ...)",
        }.get(code, "check the password (--password, --password-file or BINLOG_CDC_PASSWORD) "
                    "and that the account exists for this client host")
        return AuthenticationError(f"the server{at} refused user {user!r}: {hint} [{srv}]")
    if code in (ER_SPECIFIC_ACCESS_DENIED, ER_DBACCESS_DENIED, 1142, 1143):
        fix = f"; run as an administrator: {grant}" if grant else ""
        return PrivilegeError(f"user {user!r} lacks a privilege the replica needs{at} [{srv}]{fix}")
    if code == ER_HOST_IS_BLOCKED:
        return ServerConfigError(f"the server{at} blocks this host after too many failed "
                                 f"connections: run FLUSH HOSTS (or mariadb-admin flush-hosts) "
                                 f"[{srv}]")
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        return _map_1236(message, srv, at, start)
    if code in TRANSIENT_CODES:
        return TransientServerError(f"connection to the server{at} lost: {srv}", code)
    return ReplicationError(f"the server{at} stopped the replication stream: {srv}")


def _map_1236(message: str, srv: str, at: str, start: str | None) -> CdcError:
    asked = f" for {start}" if start else ""
    low = message.lower()
    if _PURGED.search(message):
        missing = re.search(r"missing transactions are '([^']*)'", message)
        extra = f"; the missing GTIDs are {missing.group(1)}" if missing else ""
        return BinlogPurgedError(
            f"the binlog the replica needs{asked} is no longer on the server{at}{extra}: it was "
            f"purged (or never existed). Restart from a position the server still has "
            f"(start='earliest', or a fresh snapshot) [{srv}]")
    if "same server_uuid/server_id" in low or "same server_id" in low:
        return ServerIdConflictError(
            f"another replica connected to the server{at} with the same server_id, and the "
            f"server dropped this one: give every replica a unique server_id [{srv}]")
    if "max_allowed_packet" in low:
        return ServerConfigError(
            f"an event is larger than the server's max_allowed_packet{at}: raise it (SET GLOBAL "
            f"max_allowed_packet=1073741824) [{srv}]")
    if "checksum" in low:
        return ServerConfigError(f"binlog checksum negotiation failed{at} [{srv}]")
    if "position > file size" in low or "position is larger" in low or "start from position" \
            in low or "binlog truncated" in low or "wrong offset" in low or "bogus data" in low:
        return ConfigurationError(
            f"the requested start{asked} is not a valid event position in that binlog file{at}; "
            f"use a position printed by SHOW BINARY LOGS / a transaction's end_pos [{srv}]")
    return ReplicationError(f"the server{at} cannot send the binlog{asked} [{srv}]")


def is_transient(exc: BaseException) -> bool:
    """Whether a reconnect may help after *exc*."""
    from cdc.replica.packets import ConnectionLost
    if isinstance(exc, (ConnectionLost, TransientServerError)):
        return True
    if isinstance(exc, CdcError):
        return False
    if isinstance(exc, (OSError, EOFError)):
        return True
    try:
        import pymysql
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, (pymysql.err.OperationalError, pymysql.err.InterfaceError,
                        pymysql.err.InternalError)):
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        return code is None or code in TRANSIENT_CODES or code == 0
    return False
