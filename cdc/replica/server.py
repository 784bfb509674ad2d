"""What binlog-cdc knows about the source server as a product: its flavour (MySQL or MariaDB) and
version, and what follows from them -- the statement that gives the binlog's end, the privileges
a stream needs in the server's own words, the databases that are never captured, and where the
tables' keys are read from.

Sans-IO like :mod:`cdc.replica.protocol`: functions that ask the server take
``query(sql, args) -> rows`` (values may be bytes).

The flavour of a binlog *file* (the FORMAT_DESCRIPTION event's server version, read by the
parser) is a fact of the file, not of the server a client is connected to, and stays with the
parser (:class:`cdc.binlog.events.base.FormatDescriptionEvent`).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

from cdc.errors import CdcError, PrivilegeError, is_transient

__all__ = ["ServerInfo", "parse_server_version", "server_of", "is_mariadb", "grant_statement",
           "quote_account", "current_account", "missing_privileges", "lacking_words",
           "privilege_error", "check_table_select", "SYSTEM_SCHEMAS", "system_schemas_sql",
           "KeyPart", "read_unique_keys", "table_unique_keys", "primary_key",
           "read_primary_keys"]

Query = Callable[..., list]

#: databases whose tables are never captured, seeded or snapshotted
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def system_schemas_sql() -> str:
    """``'mysql', 'information_schema', ...``: :data:`SYSTEM_SCHEMAS` for ``NOT IN (...)``."""
    return ", ".join(f"'{s}'" for s in SYSTEM_SCHEMAS)


def is_mariadb(version_text) -> bool:
    """Whether a version text (the handshake's, ``VERSION()``) is MariaDB's."""
    if isinstance(version_text, (bytes, bytearray)):
        version_text = version_text.decode("utf-8", "replace")
    return "mariadb" in str(version_text or "").lower()


class ServerInfo(NamedTuple):
    """The server's version text, flavour and version number."""

    version_text: str
    is_mariadb: bool
    version: tuple[int, int, int]

    @property
    def flavor(self) -> str:
        return "MariaDB" if self.is_mariadb else "MySQL"

    @property
    def status_sql(self) -> str:
        """The statement that gives the binlog's end: MySQL 8.2 added ``SHOW BINARY LOG
        STATUS`` and 8.4 removed ``SHOW MASTER STATUS``, which every MariaDB knows."""
        if not self.is_mariadb and self.version >= (8, 2, 0):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    @property
    def monitor_privilege(self) -> str:
        """The privilege the binlog's end and file list need: MariaDB 10.5.2 made it BINLOG
        MONITOR (REPLICATION CLIENT is an alias there)."""
        if self.is_mariadb and self.version >= (10, 5, 2):
            return "BINLOG MONITOR"
        return "REPLICATION CLIENT"


def parse_server_version(text) -> ServerInfo:
    """``'5.5.5-10.11.6-MariaDB-log'`` (MariaDB's handshake prefix), ``'10.11.6-MariaDB'`` or
    ``'8.4.0'``."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", "replace")
    text = str(text or "")
    maria = is_mariadb(text)
    body = text[6:] if maria and text.startswith("5.5.5-") else text
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", body)
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)
    return ServerInfo(text, maria, version)


def server_of(conn) -> ServerInfo:
    """The server of a PyMySQL connection (its handshake's version: no statement)."""
    return parse_server_version(conn.get_server_info())


# --- privileges ----------------------------------------------------------------------------------


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


def current_account(query: Query, user: str) -> str:
    """The account the session runs as (``'cdc'@'%'``), or ``'user'@'%'`` when it cannot be
    asked."""
    try:
        rows = query("SELECT CURRENT_USER()", None)
        value = rows[0][0]
        if isinstance(value, (bytes, bytearray)):
            value = value.decode("utf-8", "replace")
        return quote_account(str(value))
    except Exception:  # noqa: BLE001 -- a guess is all a privilege message needs
        return f"'{user}'@'%'"


_PRIV_SLAVE = ("REPLICATION SLAVE", "REPLICATION REPLICA", "ALL PRIVILEGES")
_PRIV_CLIENT = ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", "ALL PRIVILEGES")


def missing_privileges(grants: list[str]) -> list[str] | None:
    """From ``SHOW GRANTS`` lines: the missing replication privileges ([] when all present), or
    None when it cannot tell (roles are granted, and their privileges are not listed). The
    binlog monitor privilege is named ``REPLICATION CLIENT`` (see
    :attr:`ServerInfo.monitor_privilege` for the server's word)."""
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


def privilege_error(*, user: str, account: str, where: str, lacking: str, needed_for: str,
                    grant: str) -> PrivilegeError:
    """The one-line error for an account that lacks *lacking* (in the server's words), which
    binlog-cdc needs *needed_for*; *grant* is the statement that gives it."""
    return PrivilegeError(f"user {user!r} ({account}) lacks {lacking} on {where}, which "
                          f"{needed_for}. Run as an administrator: {grant}")


def lacking_words(info: ServerInfo, missing: list[str]) -> str:
    """:func:`missing_privileges`' names in the server's words (``BINLOG MONITOR`` on MariaDB
    10.5.2+ for ``REPLICATION CLIENT``)."""
    return " and ".join(info.monitor_privilege if p == "REPLICATION CLIENT" else p
                        for p in missing)


def _quote_name(name: str) -> str:
    return "`" + str(name).replace("`", "``") + "`"


def check_table_select(query: Query, db: str, table: str, *, user: str, where: str) -> None:
    """For a table information_schema does not show: a PrivilegeError with the GRANT when the
    account may not read it (information_schema hides such tables instead of refusing);
    nothing when it is just not there."""
    import pymysql
    try:
        query(f"SELECT 1 FROM {_quote_name(db)}.{_quote_name(table)} LIMIT 0", None)
        return
    except PrivilegeError:                      # a query that maps server errors already
        pass
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        if code not in (1142, 1143, 1044):      # table / column / database access denied
            return
    except CdcError as e:
        if is_transient(e):
            raise
        return
    account = current_account(query, user)
    raise privilege_error(user=user, account=account, where=where,
                          lacking=f"SELECT on {db}.{table}",
                          needed_for="binlog-cdc needs to read its columns from information_schema",
                          grant=f"GRANT SELECT ON {_quote_name(db)}.* TO {account};")


# --- keys ----------------------------------------------------------------------------------------

_UNIQUE_KEYS_SQL = (
    "SELECT s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME, s.COLUMN_NAME, s.SUB_PART, s.NULLABLE "
    "FROM information_schema.STATISTICS s WHERE s.NON_UNIQUE = 0 AND {where} "
    "ORDER BY s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME = 'PRIMARY' DESC, s.INDEX_NAME, "
    "s.SEQ_IN_INDEX")


class KeyPart(NamedTuple):
    """One column of a unique key (``column`` None: a functional key part)."""

    column: str | None
    sub_part: int | None      # a prefix length: the key does not hold the whole value
    nullable: bool


def _text(v):
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v


def read_unique_keys(query: Query, where: str, args=None) -> dict[tuple, dict[str, list]]:
    """``{(db, table): {index name: [KeyPart in key order]}}`` of the unique keys
    (``PRIMARY`` first, then by name) of the tables *where* selects (a condition on
    ``information_schema.STATISTICS s``, with *args*)."""
    out: dict[tuple, dict[str, list]] = {}
    for db, table, index, column, sub_part, nullable in query(
            _UNIQUE_KEYS_SQL.format(where=where), args or None):
        key = (str(_text(db)), str(_text(table)))
        parts = out.setdefault(key, {}).setdefault(str(_text(index)), [])
        parts.append(KeyPart(None if column is None else str(_text(column)),
                             None if sub_part is None else int(sub_part),
                             str(_text(nullable) or "").upper() == "YES"))
    return out


def table_unique_keys(query: Query, db: str, table: str) -> dict[str, list]:
    """``{index name: [KeyPart in key order]}`` of one table's unique keys (see
    :func:`read_unique_keys`; ``{}``: none, or the table is not there)."""
    found = read_unique_keys(query, "s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s", (db, table))
    return next(iter(found.values()), {})


def primary_key(query: Query, db: str, table: str) -> list[str]:
    """The primary key columns of one table, in key order (``[]``: it has none)."""
    return [p.column for p in table_unique_keys(query, db, table).get("PRIMARY", [])]


def read_primary_keys(query: Query, where: str, args=None) -> dict[tuple, list[str]]:
    """``{(db, table): [primary key columns in key order]}`` of the tables *where* selects
    (see :func:`read_unique_keys`) that have a primary key."""
    return {k: [p.column for p in keys["PRIMARY"]]
            for k, keys in read_unique_keys(query, where, args).items() if "PRIMARY" in keys}
