"""Pre-flight checks before a binlog dump, each turning a misconfigured server or account into
one clear error that says what to do, and the session variables a dump needs.

Every check takes ``query(sql, args=None) -> rows`` (server errors already mapped to
binlog-cdc errors), so it can be tested against canned answers.
"""

from __future__ import annotations

import logging
from typing import Callable

from cdc.binlog.gtid import GtidSet, MariaGtidPosition
from cdc.errors import (BinlogPurgedError, ConfigurationError, PrivilegeError, ServerConfigError,
                        ServerIdConflictError)
from cdc.positions import Start, purged_error
from cdc.replica.protocol import MARIA_SLAVE_CAPABILITY_GTID
from cdc.replica.server import (ServerInfo, grant_statement, lacking_words, missing_privileges,
                                privilege_error)
from cdc.replica.sql import binary_logs

log = logging.getLogger("cdc.replica")

Query = Callable[..., list]

#: The server variables the checks read (one SHOW GLOBAL VARIABLES).
VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_checksum", "server_id",
             "gtid_mode", "gtid_purged")


def server_variables(query: Query) -> dict[str, object]:
    """The :data:`VARIABLES` of the server, keys lower-cased."""
    names = ", ".join(f"'{v}'" for v in VARIABLES)
    return {str(k).lower(): v for k, v in query(
        f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")}


def check_binlog_config(v: dict, where: str, *, warn_row_image: bool = True) -> bool:
    """log_bin on and binlog_format ROW, or ServerConfigError; a row image other than FULL is
    logged (when *warn_row_image*). Returns whether it was logged."""
    log_bin = str(v.get("log_bin", "OFF")).upper()
    if log_bin not in ("ON", "1"):
        raise ServerConfigError(
            f"binary logging is off on {where} (log_bin={log_bin}): start the server "
            f"with log_bin (e.g. log-bin=mysql-bin and server-id=1 in the [mysqld] section "
            f"of my.cnf) and restart it")
    fmt = str(v.get("binlog_format", "")).upper()
    if fmt != "ROW":
        raise ServerConfigError(
            f"binlog_format is {fmt or 'unknown'} on {where}; row-based CDC needs ROW: "
            f"run SET GLOBAL binlog_format = 'ROW' (affects new sessions) and put "
            f"binlog_format=ROW in the [mysqld] section of my.cnf")
    image = str(v.get("binlog_row_image", "FULL")).upper()
    if image != "FULL" and warn_row_image:
        log.warning("binlog_row_image is %s on %s: row images will lack the columns the "
                    "server leaves out (they come out as ABSENT); SET GLOBAL "
                    "binlog_row_image = 'FULL' for complete before/after images", image, where)
        return True
    return False


def check_privileges(query: Query, info: ServerInfo, *, user: str, account: str,
                     where: str) -> None:
    """REPLICATION SLAVE and REPLICATION CLIENT (BINLOG MONITOR) granted, or PrivilegeError
    with the GRANT."""
    try:
        grants = [str(r[0]) for r in query("SHOW GRANTS")]
    except PrivilegeError:
        return
    missing = missing_privileges(grants)
    if missing:
        raise privilege_error(user=user, account=account, where=where,
                              lacking=lacking_words(info, missing),
                              needed_for="a replica needs to read the binlog",
                              grant=grant_statement(info, account))


def check_server_id(conn, info: ServerInfo, variables: dict, *, server_id: int,
                    where: str) -> None:
    """No clash with the source's own server_id or a connected replica's (SHOW REPLICAS /
    SHOW SLAVE HOSTS on the PyMySQL connection *conn*; skipped when the server refuses)."""
    import pymysql
    own = variables.get("server_id")
    if own is not None and str(own) == str(server_id):
        raise ServerIdConflictError(
            f"server_id {server_id} is the source's own server_id on {where}; "
            f"give this replica a different server_id")
    new_syntax = (not info.is_mariadb and info.version >= (8, 0, 22))
    sql = "SHOW REPLICAS" if new_syntax else "SHOW SLAVE HOSTS"
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = list(cur.fetchall())
            cols = [d[0].lower() for d in cur.description or ()]
    except pymysql.err.MySQLError as e:
        log.debug("cannot check for server_id clashes (%s): %s", sql, e)
        return
    if "server_id" not in cols:
        return
    i = cols.index("server_id")
    h = cols.index("host") if "host" in cols else None
    for row in rows:
        if str(row[i]) == str(server_id):
            who = f" (host {row[h]!r})" if h is not None else ""
            raise ServerIdConflictError(
                f"another replica{who} is connected to {where} with server_id "
                f"{server_id} ({sql}); the server would disconnect one of the two. "
                f"Give this replica a unique server_id (e.g. --server-id)")


def check_start(query: Query, info: ServerInfo, v: dict, start: Start, *, where: str) -> None:
    """The server still has what *start* asks for, and the start fits the server's flavour."""
    if start.kind == "file":
        logs = binary_logs(query)
        if start.file not in {n for n, _ in logs}:
            raise purged_error(start.file, logs, where, fix=(
                "Start from 'earliest' or from a GTID position the server still has"))
    elif start.kind == "gtid":
        if info.is_mariadb:
            raise ConfigurationError(
                f"{where} is MariaDB: give a MariaDB GTID position ('0-1-42'), not a "
                f"MySQL GTID set")
        mode = str(v.get("gtid_mode", "OFF")).upper()
        if mode != "ON":
            raise ServerConfigError(
                f"gtid_mode is {mode} on {where}; a GTID start needs gtid_mode=ON and "
                f"enforce_gtid_consistency=ON (or start from a file and position)")
        purged = GtidSet.parse(str(v.get("gtid_purged") or ""))
        have = GtidSet.parse(start.gtid)
        missing = purged.subtract(have)
        if missing:
            raise BinlogPurgedError(
                f"the server {where} has purged transactions the replica has not seen: "
                f"{missing} (gtid_purged is {purged}, requested from {have or 'nothing'}). "
                f"Those changes are lost to this replica; restart from a fresh snapshot")
    elif start.kind == "mariadb_gtid" and not info.is_mariadb:
        raise ConfigurationError(
            f"{where} is MySQL: give a GTID set ('uuid:1-42'), not a MariaDB GTID position")


def session_sql(info: ServerInfo, v: dict, start: Start, *, heartbeat_ns: int | None,
                gtid_strict_mode: bool = False,
                gtid_ignore_duplicates: bool = False) -> list[str]:
    """The SET statements before the dump: checksum, heartbeat, MariaDB capabilities and GTID
    start state (MySQL 8.0.26+ also gets the ``@source_`` spellings)."""
    sql = []
    new_names = not info.is_mariadb and info.version >= (8, 0, 26)
    if "binlog_checksum" in v:
        sql.append("SET @master_binlog_checksum = @@global.binlog_checksum")
        if new_names:
            sql.append("SET @source_binlog_checksum = @@global.binlog_checksum")
    if heartbeat_ns:
        sql.append(f"SET @master_heartbeat_period = {heartbeat_ns}")
        if new_names:
            sql.append(f"SET @source_heartbeat_period = {heartbeat_ns}")
    if info.is_mariadb:
        sql.append(f"SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}")
        if start.kind == "mariadb_gtid":
            sql.append(f"SET @slave_connect_state = '{MariaGtidPosition.parse(start.gtid)}'")
            sql.append(f"SET @slave_gtid_strict_mode = {int(gtid_strict_mode)}")
            sql.append(f"SET @slave_gtid_ignore_duplicates = {int(gtid_ignore_duplicates)}")
    return sql
