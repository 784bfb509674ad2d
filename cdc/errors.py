"""The error hierarchy of binlog-cdc.

Every error raised on purpose by this package derives from :class:`CdcError`.
Messages say what went wrong *and* what to do about it.
"""

from __future__ import annotations


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


class SchemaError(CdcError):
    """Row images cannot be decoded with the table map at hand (unknown table id, unknown type)."""


# --- GTIDs --------------------------------------------------------------------------------------


class GtidError(CdcError, ValueError):
    """A GTID or GTID set text or encoding is malformed."""


# --- configuration ---------------------------------------------------------------------------


class ConfigurationError(CdcError, ValueError):
    """Bad options or arguments given by the user."""


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


class ServerIdConflictError(ReplicationError):
    """Another replica is connected with the same server_id."""
