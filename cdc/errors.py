"""The error hierarchy of binlog-cdc.

Every error raised on purpose by this package derives from :class:`CdcError`.
Messages say what went wrong *and* what to do about it.
"""

from __future__ import annotations

import difflib
import re


class CdcError(Exception):
    """Base class of every binlog-cdc error."""


# --- decoding -------------------------------------------------------------------------------


class ParseError(CdcError):
    """The binlog bytes do not decode: corrupt, truncated or of an unsupported kind."""

    def __init__(self, message: str, *, file: str | None = None, position: int | None = None):
        self.file = file
        self.position = position
        where = _where(file, position)
        super().__init__(f"{message}{where}")


def _where(file: str | None, position: int | None) -> str:
    if file is None and position is None:
        return ""
    parts = []
    if file is not None:
        parts.append(f"file {file}")
    if position is not None:
        parts.append(f"position {position}")
    return " (at " + ", ".join(parts) + ")"


class ChecksumError(ParseError):
    """An event's CRC32 does not match its bytes."""

    def __init__(self, *, expected: int, actual: int, event_type: int,
                 file: str | None = None, position: int | None = None):
        self.expected = expected
        self.actual = actual
        self.event_type = event_type
        super().__init__(
            f"CRC32 mismatch in event type {event_type}: stored 0x{expected:08x}, computed "
            f"0x{actual:08x}; the binlog is corrupt (copy it again from the server, or pass "
            f"verify_checksum=False to read it anyway)",
            file=file, position=position)


class TruncatedEventError(ParseError):
    """The bytes end in the middle of an event (or an event is shorter than its layout)."""


class BadMagicError(ParseError):
    """A binlog file does not start with the 4-byte magic ``\\xfebin``."""


class UnsupportedBinlogVersionError(ParseError):
    """A binlog version this parser does not decode (v1/v3 start events, or unknown)."""


class EncryptedBinlogError(ParseError):
    """START_ENCRYPTION_EVENT seen: the rest of the file is encrypted."""


class CompressionError(ParseError):
    """A compressed event (MariaDB zlib, MySQL zstd payload) does not decompress."""


class JsonBinaryError(ParseError):
    """A MySQL binary JSON document is truncated or corrupt."""


class JsonDiffError(ParseError):
    """A JSON diff of a PARTIAL_UPDATE_ROWS event is malformed or does not apply."""


class SchemaError(CdcError):
    """Row images cannot be decoded with the table map at hand (unknown table id, unknown type)."""


class ShapeChangedError(SchemaError):
    """A DDL statement changed the shape of the one table a typed stream (option ``table``)
    delivers: the query stops there; restarted, it reads the new shape and continues."""


# --- GTIDs --------------------------------------------------------------------------------------


class GtidError(CdcError, ValueError):
    """A GTID or GTID set text or encoding is malformed."""


# --- configuration ---------------------------------------------------------------------------


class ConfigurationError(CdcError, ValueError):
    """Bad options or arguments given by the user."""


class SparkVersionError(ConfigurationError):
    """A feature asked of a PySpark release that cannot do it (the message names the release
    that can)."""


# --- replication --------------------------------------------------------------------------------


class ReplicationError(CdcError):
    """Talking to the source server failed."""


class ServerConnectionError(ReplicationError):
    """The server could not be reached, or the connection was lost and retries ran out."""


class AuthenticationError(ReplicationError):
    """The server refused the user's credentials."""


class ServerConfigError(ReplicationError):
    """The server is not configured for row-based CDC (binlog off, binlog_format not ROW, ...)."""


class PrivilegeError(ReplicationError):
    """The user lacks REPLICATION SLAVE / REPLICATION CLIENT (or equivalent) privileges."""


class BinlogPurgedError(ReplicationError):
    """The requested binlog file or GTIDs are no longer on the server."""


class DivergedServerError(ReplicationError):
    """The server lacks transactions a stream position already delivered (a failover to a
    replica that never received them): resuming there would silently diverge."""


class ServerIdConflictError(ReplicationError):
    """Another replica is connected with the same server_id."""


class EmbeddedServerError(CdcError, RuntimeError):
    """The private MariaDB server (:mod:`cdc.embedded`) could not be initialised, started or
    stopped."""


class ConnectionLost(ServerConnectionError):
    """The connection to the server closed or failed; the client reconnects (transient)."""


class ProtocolError(ConnectionLost):
    """The byte stream stopped making sense (sequence numbers out of order); reconnecting
    restarts from a clean state."""


class PacketTooLargeError(ProtocolError):
    """The server sent (or announced) a payload over the client's ``max_packet_size``:
    reconnecting would meet it again, so it is not retried."""


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


#: Where the CLI takes a password from (the default hint of an authentication error).
CLI_PASSWORD_HINT = "--password, --password-file or BINLOG_CDC_PASSWORD"


class TransientServerError(ServerConnectionError):
    """A server error after which the client reconnects (shutdown, killed connection...)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class ServerUnreachableError(TransientServerError):
    """Nothing answers at the server's address: the connection was refused, or the host name
    does not resolve. A first connection fails at once on it (a wrong host or port); a
    connection lost after a first success retries it (the server may be restarting)."""


def connect_reason(e: BaseException) -> str:
    """A connect error without the "connection lost" framing of :class:`TransientServerError`
    (it never connected): the server's message and code."""
    code = getattr(e, "code", None)
    cause = e.__cause__
    if code is not None and cause is not None and len(getattr(cause, "args", ())) > 1:
        return f"{cause.args[1]} [error {code}]"
    return str(e)


def map_server_error(code: int, message: str, *, user: str | None = None,
                     where: str | None = None, start: str | None = None,
                     grant: str | None = None, password_hint: str | None = None) -> CdcError:
    """The binlog-cdc error for a server error (from PyMySQL or an ERR packet in the dump).

    :param where: ``host:port`` for messages; :param start: what was asked for (``"file
        mysql-bin.000003 position 4"``, ``"GTID set ..."``); :param grant: the GRANT to suggest;
        :param password_hint: where the password is set, in the caller's terms (default: the
        CLI's options; the Spark source names its own).
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
        }.get(code, f"check the password ({password_hint or CLI_PASSWORD_HINT}) and that "
                    f"the account exists for this client host")
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
    at_start = _failed_at_start(message)
    if "max_allowed_packet" in low and not at_start:
        return ServerConfigError(
            f"an event is larger than the server's max_allowed_packet{at}: raise it (SET GLOBAL "
            f"max_allowed_packet=1073741824) [{srv}]")
    if "checksum" in low:
        return ServerConfigError(f"binlog checksum negotiation failed{at} [{srv}]")
    if at_start or "position > file size" in low or "position is larger" in low or \
            "start from position" in low or "binlog truncated" in low or "wrong offset" in low \
            or "bogus data" in low:
        return not_an_event_start(start, at, srv)
    return ReplicationError(f"the server{at} cannot send the binlog{asked} [{srv}]")


def not_an_event_start(start: str | None, at: str, detail: str) -> ConfigurationError:
    """The error for a requested start (*start*: ``"file mysql-bin.000003 position 200"``) that
    is not where an event begins; *at*: `` (host:port)``; *detail*: what the server said."""
    asked = f" for {start}" if start else ""
    return ConfigurationError(
        f"the requested start{asked} is not a valid event position in that binlog file{at}; "
        f"use a position printed by SHOW BINARY LOGS / a transaction's end_pos [{detail}]")


# "... the first event 'mysql-bin.000001' at 5, the last event read from '...' at 127, the last
# byte read from '.../mysql-bin.000001' at 24."
_DUMP_PLACES = re.compile(r"first event '[^']*' at (\d+).*last byte read from '[^']*' at (\d+)",
                          re.S)


def _failed_at_start(message: str) -> bool:
    """Whether a dump error is about the event header at the requested start itself (the server
    read no more than a header's 19 bytes from there): a start that is not where an event
    begins -- its "event length" is whatever bytes are there, often more than
    max_allowed_packet."""
    m = _DUMP_PLACES.search(message)
    return m is not None and 0 < int(m.group(2)) - int(m.group(1)) <= 19


def is_transient(exc: BaseException) -> bool:
    """Whether a reconnect may help after *exc*."""
    if isinstance(exc, PacketTooLargeError):
        return False
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


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean X?)`` for the choice closest to *word* (case aside), else ``""``: the
    hint every "unknown name" error gives."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]}?)" if close else ""
