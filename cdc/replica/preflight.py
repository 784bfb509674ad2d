"""Pre-flight checks before a binlog dump, each turning a misconfigured server or account into
one clear error that says what to do, and the session variables a dump needs.

Every check takes ``query(sql, args=None) -> rows`` (server errors already mapped to
binlog-cdc errors), so it can be tested against canned answers. The checks of the server's
configuration give :class:`Finding` s (PASS, WARN or FAIL, with the fix): the replica client
raises the FAILs (:func:`raise_failures`), ``binlog-cdc check`` (:mod:`cdc.check`) shows them all.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, NamedTuple

from cdc.binlog.gtid import GtidSet, MariaGtidPosition
from cdc.errors import (BinlogPurgedError, ConfigurationError, PrivilegeError,
                        ServerConfigError, ServerIdConflictError)
from cdc.positions import Position, Start, purged_error
from cdc.replica.failover import check_contained
from cdc.replica.protocol import MARIA_SLAVE_CAPABILITY_GTID
from cdc.replica.server import (ServerInfo, grant_statement, lacking_words, missing_privileges,
                                privilege_error)
from cdc.replica.sql import binary_logs

log = logging.getLogger("cdc.replica")

Query = Callable[..., list]

#: The server variables the checks read (one SHOW GLOBAL VARIABLES).
VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_checksum", "server_id",
             "gtid_mode", "gtid_purged", "binlog_row_metadata", "binlog_expire_logs_seconds",
             "expire_logs_days", "binlog_expire_logs_auto_purge", "binlog_legacy_event_pos")

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


class Finding(NamedTuple):
    """One check's verdict: *status* PASS, WARN or FAIL, the *check*'s name, the *message*
    (what was found; with WARN and FAIL what to do), and the error a FAIL raises."""

    status: str
    check: str
    message: str
    error: type = ServerConfigError


def raise_failures(findings: Iterable[Finding]) -> None:
    """Raise the error of the first FAIL, its message followed by the other FAILs', if any."""
    fails = [f for f in findings if f.status == FAIL]
    if fails:
        more = "".join(f"; also: {f.message}" for f in fails[1:])
        raise fails[0].error(fails[0].message + more)


def server_variables(query: Query) -> dict[str, object]:
    """The :data:`VARIABLES` of the server, keys lower-cased."""
    names = ", ".join(f"'{v}'" for v in VARIABLES)
    return {str(k).lower(): v for k, v in query(
        f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")}


def binlog_findings(v: dict, where: str, *, upsert: bool = False) -> list[Finding]:
    """log_bin on, binlog_format ROW (else FAIL), binlog_row_image FULL (else WARN; FAIL for a
    sink that upserts: it needs whole after images), binlog_row_metadata FULL (else WARN)."""
    out = []
    log_bin = str(v.get("log_bin", "OFF")).upper()
    if log_bin not in ("ON", "1"):
        return [Finding(FAIL, "log_bin", f"binary logging is off on {where} (log_bin={log_bin}): "
                        f"start the server with log_bin (e.g. log-bin=mysql-bin and server-id=1 "
                        f"in the [mysqld] section of my.cnf) and restart it")]
    out.append(Finding(PASS, "log_bin", "binary logging is on"))
    fmt = str(v.get("binlog_format", "")).upper()
    if fmt != "ROW":
        out.append(Finding(FAIL, "binlog_format", (
            f"binlog_format is {fmt or 'unknown'} on {where}; row-based CDC needs ROW: run SET "
            f"GLOBAL binlog_format = 'ROW' (affects new sessions) and put binlog_format=ROW in "
            f"the [mysqld] section of my.cnf")))
    else:
        out.append(Finding(PASS, "binlog_format", "binlog_format is ROW"))
    image = str(v.get("binlog_row_image", "FULL")).upper()
    if image == "FULL":
        out.append(Finding(PASS, "binlog_row_image", "binlog_row_image is FULL"))
    else:
        out.append(Finding(FAIL if upsert else WARN, "binlog_row_image", (
            f"binlog_row_image is {image} on {where}: row images will lack the columns the "
            f"server leaves out (they come out as ABSENT)"
            + ("; a sink that upserts needs whole after images" if upsert else "")
            + "; SET GLOBAL binlog_row_image = 'FULL' for complete before/after images")))
    meta = v.get("binlog_row_metadata")
    if meta is None:
        out.append(Finding(WARN, "binlog_row_metadata", (
            f"{where} has no binlog_row_metadata (MySQL before 8.0.1, MariaDB before 10.5): "
            f"column names, charsets and keys are read from information_schema (SELECT on the "
            f"tables needed)")))
    elif str(meta).upper() == "FULL":
        out.append(Finding(PASS, "binlog_row_metadata", "binlog_row_metadata is FULL"))
    else:
        out.append(Finding(WARN, "binlog_row_metadata", (
            f"binlog_row_metadata is {str(meta).upper()} on {where}: table maps lack column "
            f"names, charsets and keys, which binlog-cdc reads from information_schema and "
            f"follows along the DDL (SELECT on the tables needed); SET GLOBAL "
            f"binlog_row_metadata = 'FULL' makes the binlog carry them")))
    return out


def gtid_finding(info: ServerInfo, v: dict) -> Finding:
    """The server's GTIDs: MariaDB's always; MySQL's with gtid_mode=ON."""
    if info.is_mariadb:
        return Finding(PASS, "gtid", "MariaDB GTIDs (domain-server-sequence) are available")
    mode = str(v.get("gtid_mode", "OFF")).upper()
    if mode == "ON":
        return Finding(PASS, "gtid", "gtid_mode is ON")
    return Finding(PASS, "gtid", f"gtid_mode is {mode}: positions are binlog files and "
                                 f"offsets (a GTID start needs gtid_mode=ON)")


def retention_seconds(v: dict) -> tuple[float | None, str]:
    """How long the server keeps a binlog file (None: until purged by hand), and the setting
    that says so: ``binlog_expire_logs_seconds``, else ``expire_logs_days``."""
    if str(v.get("binlog_expire_logs_auto_purge", "ON")).upper() in ("OFF", "0"):
        return None, "binlog_expire_logs_auto_purge=OFF"
    seconds = float(v.get("binlog_expire_logs_seconds") or 0)
    if seconds > 0:
        return seconds, f"binlog_expire_logs_seconds={v.get('binlog_expire_logs_seconds')}"
    days = float(v.get("expire_logs_days") or 0)
    if days > 0:
        return days * 86400, f"expire_logs_days={v.get('expire_logs_days')}"
    return None, "binlog_expire_logs_seconds=0 and expire_logs_days=0"


def duration_text(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s"


def retention_finding(v: dict, where: str, *, snapshot_seconds: float | None = None,
                      snapshot_what: str = "", batch_seconds: float | None = None,
                      batch_what: str = "") -> Finding:
    """The binlog retention against the time an initial snapshot takes (*snapshot_seconds*,
    estimated; None: no snapshot) and one batch of it (*batch_seconds*; None: the whole
    snapshot is one batch). The snapshot reads the binlog along, batch by batch: the binlog
    from a batch's start must still be there when the stream reads it (FAIL otherwise); a
    retention shorter than the whole snapshot is a WARN (a stop during the snapshot must be
    shorter). Without a snapshot, how long a stopped stream can stay stopped."""
    kept, setting = retention_seconds(v)
    if kept is None:
        return Finding(PASS, "retention", f"binlogs are kept until purged by hand ({setting})")
    text = f"binlogs are kept for {duration_text(kept)} ({setting})"
    if snapshot_seconds is None:
        return Finding(PASS, "retention", f"{text}: a stream stopped for longer must start over")
    need = f"{duration_text(snapshot_seconds)}{snapshot_what}"
    whole = batch_seconds is None or batch_seconds >= snapshot_seconds
    batch = snapshot_seconds if whole else batch_seconds
    fix = (f"raise it to at least twice that (SET GLOBAL binlog_expire_logs_seconds = "
           f"{int(max(2 * batch, 3600))}, and in my.cnf)")
    if kept <= batch:
        if whole:
            return Finding(FAIL, "retention", (
                f"{text} on {where}, less than the initial snapshot's estimated {need}: the "
                f"binlog from the snapshot's start would be purged before the stream reads it; "
                f"{fix}"), BinlogPurgedError)
        return Finding(FAIL, "retention", (
            f"{text} on {where}, less than one snapshot batch's estimated "
            f"{duration_text(batch)}{batch_what}: the binlog from a batch's start would be purged "
            f"before the stream reads it; {fix}, or make batches smaller "
            f"(snapshotRowsPerTrigger)"), BinlogPurgedError)
    if kept < 2 * batch:
        what = "the initial snapshot's" if whole else "one snapshot batch's"
        return Finding(WARN, "retention", f"{text}, less than twice {what} estimated "
                                          f"{need if whole else duration_text(batch)}; {fix}")
    if kept <= snapshot_seconds:
        return Finding(WARN, "retention", (
            f"{text}, less than the initial snapshot's estimated {need}: nothing is lost while "
            f"the query runs (each snapshot batch reads the binlog along{batch_what}), but a "
            f"query stopped during the snapshot for longer than the retention resumes only with "
            f"onDataLoss=resnapshot (or a new snapshot)"))
    return Finding(PASS, "retention", f"{text}; the initial snapshot takes about {need}")


def check_binlog_config(v: dict, where: str, *, warn_row_image: bool = True) -> bool:
    """log_bin on and binlog_format ROW, or ServerConfigError; a row image other than FULL is
    logged (when *warn_row_image*). Returns whether it was logged."""
    findings = binlog_findings(v, where)
    raise_failures(findings)
    image = next(f for f in findings if f.check == "binlog_row_image")
    if image.status == WARN and warn_row_image:
        log.warning("%s", image.message)
        return True
    return False


def privilege_finding(query: Query, info: ServerInfo, *, user: str, account: str,
                      where: str) -> Finding:
    """REPLICATION SLAVE and REPLICATION CLIENT granted (FAIL with the GRANT to run); WARN when
    SHOW GRANTS does not tell."""
    try:
        grants = [str(r[0]) for r in query("SHOW GRANTS")]
    except PrivilegeError:
        return Finding(WARN, "privileges", f"SHOW GRANTS is refused to {account}: cannot tell "
                                           f"its replication privileges", PrivilegeError)
    missing = missing_privileges(grants)
    if missing is None:
        return Finding(WARN, "privileges", f"{account} has its privileges through roles, "
                                           f"which SHOW GRANTS does not list: cannot tell",
                       PrivilegeError)
    if missing:
        return Finding(FAIL, "privileges", str(privilege_error(
            user=user, account=account, where=where, lacking=lacking_words(info, missing),
            needed_for="a replica needs to read the binlog",
            grant=grant_statement(info, account))), PrivilegeError)
    return Finding(PASS, "privileges", f"{account} may read the binlog (replication privileges)")


def check_privileges(query: Query, info: ServerInfo, *, user: str, account: str,
                     where: str) -> None:
    """REPLICATION SLAVE and REPLICATION CLIENT granted, or PrivilegeError with the GRANT."""
    raise_failures([privilege_finding(query, info, user=user, account=account, where=where)])


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


def in_server_kind(start: Start, position: Position | None,
                   info: ServerInfo) -> tuple[Start, Position | None]:
    """*start* and a client's *position* from it, an empty GTID start (nothing seen yet: all the
    binlog the server has, whichever kind it was given as) made the server's kind of GTID
    start, the position with it when it has not moved from the start."""
    if not start.is_gtid or start.gtid or (start.kind == "mariadb_gtid") == info.is_mariadb:
        return start, position
    own = Start("mariadb_gtid" if info.is_mariadb else "gtid", gtid="")
    return own, own.position() if position == start.position() else position


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
        check_contained(query, have, mariadb=False, where=where)
    elif start.kind == "mariadb_gtid":
        if not info.is_mariadb:
            raise ConfigurationError(
                f"{where} is MySQL: give a GTID set ('uuid:1-42'), not a MariaDB GTID position")
        check_contained(query, MariaGtidPosition.parse(start.gtid), mariadb=True, where=where)


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
