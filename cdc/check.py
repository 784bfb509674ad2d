"""Everything binlog-cdc can know about a source before long work (``binlog-cdc check``, the Spark
source when a query starts, the job runner's ``--check``): one :class:`~cdc.replica.preflight.Finding`
per check, PASS, WARN or FAIL with the fix.

* the server is reachable (one attempt: a refused connection or a host that does not resolve is a
  FAIL at once), TLS as asked;
* the account may read the binlog (and, before a snapshot, the captured tables);
* log_bin, binlog_format, binlog_row_image, binlog_row_metadata, GTIDs
  (:mod:`cdc.replica.preflight` owns these checks; the replica client raises their FAILs);
* the start position is on the server (a file or GTID start);
* which tables ``includeTables`` matches (a name that matches none: FAIL; a glob: WARN) and
  their primary keys (a keyless table: FAIL for a sink that upserts, WARN for the plain stream);
* the binlog retention against the initial snapshot's estimated duration and one batch's (the
  tables' row counts in information_schema at :data:`SNAPSHOT_ROWS_PER_SECOND`, batches of
  :data:`~cdc.snapshot.plan.SNAPSHOT_BATCH_ROWS` rows);
* what the sink refuses (*sink_check*, given by the sink's owner, e.g. the Delta upserter).

``require(...)`` raises the FAILs as one :mod:`cdc.errors` error.
"""

from __future__ import annotations

import fnmatch
import time
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence

from cdc.errors import (BinlogPurgedError, CdcError, ConfigurationError, PrivilegeError,
                        ServerUnreachableError, TransientServerError, did_you_mean)
from cdc.positions import Start, binlog_file_number
from cdc.replica import preflight
from cdc.replica.config import ReplicaConfig, SslOptions
from cdc.replica.first_event import first_event_time
from cdc.replica.preflight import FAIL, PASS, WARN, Finding
from cdc.replica.server import quote_account, server_of
from cdc.replica.sql import binary_logs, connect, fetch_rows
from cdc.snapshot.plan import SNAPSHOT_BATCH_ROWS, estimated_rows, list_tables, quote_name

__all__ = ["SNAPSHOT_ROWS_PER_SECOND", "run_checks", "require", "render", "exit_status",
           "Finding", "PASS", "WARN", "FAIL"]

#: The snapshot rate the retention check assumes (rows per second, all tables): a cautious
#: figure for a stream into Delta (the reader alone is ten times faster).
SNAPSHOT_ROWS_PER_SECOND = 20000

# (STATISTICS: MariaDB lists TABLE_CONSTRAINTS only to accounts with more than SELECT)
_KEYED_SQL = ("SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM information_schema.STATISTICS "
              "WHERE INDEX_NAME = 'PRIMARY'")

#: ``sink_check(query, tables) -> findings``: what a sink refuses of the captured tables.
SinkCheck = Callable[[Callable, Sequence[str]], list]


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _names(tables: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(tables[:most])
    return shown + (f" and {len(tables) - most} more" if len(tables) > most else "")


def run_checks(config: ReplicaConfig, *, include: Sequence[str] = (),
               exclude: Sequence[str] = (), start: Start | None = None, snapshot: bool = False,
               upsert: bool = False, rows_per_second: float = SNAPSHOT_ROWS_PER_SECOND,
               sink_check: SinkCheck | None = None, binlog: bool = True,
               batch_rows: int = SNAPSHOT_BATCH_ROWS, oldest: bool = True,
               include_option: str = "includeTables") -> list[Finding]:
    """The findings about the source of *config* for a stream of the tables *include* (globs;
    none: all) less *exclude*, from *start*, with an initial *snapshot* read *batch_rows* rows
    per micro-batch, into a sink that *upsert* s; ``binlog=False``: a snapshot alone (no
    binlog checks); ``oldest=False``: the retention check leaves out when the oldest binlog
    begins (it reads that file's first event); *include_option*: what the findings call the
    option *include* comes from (``--include-tables`` in a CLI). Connects once; a server that cannot be reached is
    the only finding."""
    where = config.where
    try:
        conn = connect(config)
    except CdcError as e:
        return [Finding(FAIL, "connection", str(e), type(e))]
    try:
        def query(sql, args=None):
            return fetch_rows(conn, sql, args)
        return _checks(conn, query, config, where, include=include, exclude=exclude,
                       start=start, snapshot=snapshot, upsert=upsert,
                       rows_per_second=rows_per_second, sink_check=sink_check, binlog=binlog,
                       batch_rows=batch_rows, oldest=oldest, include_option=include_option)
    finally:
        conn.close()


def _checks(conn, query, config, where, *, include, exclude, start, snapshot, upsert,
            rows_per_second, sink_check, binlog, batch_rows, oldest,
            include_option="includeTables") -> list[Finding]:
    info = server_of(conn)
    account = quote_account(str(query("SELECT CURRENT_USER()")[0][0]))
    out = [Finding(PASS, "connection", f"connected to {where} ({info.flavor} "
                                       f"{'.'.join(map(str, info.version))}) as {account}"),
           _tls_finding(query, config.ssl)]
    v = preflight.server_variables(query)
    if binlog:
        out += preflight.binlog_findings(v, where, upsert=upsert)
        out.append(preflight.gtid_finding(info, v))
        out.append(preflight.privilege_finding(query, info, user=config.user, account=account,
                                               where=where))
    if binlog and start is not None and start.kind not in ("earliest", "latest"):
        out.append(_start_finding(query, info, v, start, where))
    everything = list_tables(query, None)
    tables, found = _table_findings(everything, include, exclude, where, account,
                                    include_option)
    out += found
    if snapshot:
        out.append(_select_finding(query, tables, include, info, account))
    out.append(_key_finding(query, tables, upsert))
    seconds = what = batch = None
    if snapshot:
        sizes = estimated_rows(query)
        rows = sum(sizes.get(t, 0) for t in tables)
        seconds = rows / rows_per_second
        what = f" ({rows:,} rows at {rows_per_second:,g} rows/s)"
        batch = min(rows, batch_rows) / rows_per_second
    if binlog:
        out.append(_retention_finding(config, query, info, v, where, seconds, what or "",
                                      batch, f", {batch_rows:,} rows", oldest=oldest))
    if sink_check is not None and tables:
        out += sink_check(query, tables)
    return out


def _retention_finding(config, query, info, v, where, snapshot_seconds, snapshot_what,
                       batch_seconds=None, batch_what="", oldest: bool = True) -> Finding:
    """The binlog retention: the server's setting against the initial snapshot's estimated
    duration and one snapshot batch's (:func:`~cdc.replica.preflight.retention_finding`), and
    how long binlogs have in fact been kept: the time of the first event of the oldest file. A
    WARN when earlier files were purged (the oldest is not the first of its series) less than
    one snapshot batch's duration ago (the snapshot reads the binlog along, batch by batch):
    something purges binlogs sooner than the setting says (PURGE BINARY LOGS run by hand or by a
    job, a size limit such as MariaDB's max_binlog_total_size)."""
    setting = preflight.retention_finding(v, where, snapshot_seconds=snapshot_seconds,
                                          snapshot_what=snapshot_what,
                                          batch_seconds=batch_seconds, batch_what=batch_what)
    if setting.status == FAIL or not oldest:
        return setting
    try:
        logs = binary_logs(query, info, config)
    except CdcError:             # no privilege to list them: the privileges check says so
        return setting
    if not logs:
        return setting
    oldest = logs[0][0]
    try:
        conn = connect(config)
    except CdcError:
        return setting
    try:
        began = first_event_time(conn, info, v, oldest)
    finally:
        conn._force_close()
    if began is None:
        return setting
    age = max(0.0, time.time() - began)
    at = datetime.fromtimestamp(began, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    purged = binlog_file_number(oldest, 1) > 1
    reach = (f"the oldest binlog, {oldest}, begins at {at} ({preflight.duration_text(age)} ago"
             f"{'' if purged else ', none purged yet'})")
    batch = snapshot_seconds if batch_seconds is None or snapshot_seconds is None else \
        min(batch_seconds, snapshot_seconds)
    if purged and batch is not None and age < batch:
        seconds, name = preflight.retention_seconds(v)
        kept = f"for {preflight.duration_text(seconds)}" if seconds else "until purged by hand"
        what = f"the initial snapshot's estimated {preflight.duration_text(batch)}" \
            f"{snapshot_what}" if batch == snapshot_seconds else \
            f"one snapshot batch's estimated {preflight.duration_text(batch)}{batch_what}"
        return Finding(WARN, "retention", (
            f"{reach}: binlogs before it were purged sooner than {what} takes, although the "
            f"setting keeps them {kept} ({name}): stop what purges them early (PURGE BINARY "
            f"LOGS run by hand or by a job, a binlog size limit) while the snapshot runs"),
            BinlogPurgedError)
    return setting._replace(message=f"{setting.message}; {reach}")


def _tls_finding(query, ssl) -> Finding:
    rows = query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
    cipher = str(rows[0][1]) if rows and rows[0][1] else ""
    if ssl is False:
        return Finding(PASS, "tls", "TLS is off, as asked")
    if not cipher:       # TLS asked for (required or verified) would not have connected
        return Finding(PASS, "tls", "not encrypted: the server offers no TLS (ssl mode "
                                    "preferred; require it with ssl mode required or verify_ca)")
    if isinstance(ssl, SslOptions) and (ssl.verify or (ssl.verify is None and ssl.ca)):
        checked = "certificate and host name verified" if ssl.verify_identity else \
            "certificate verified"
    else:
        checked = "certificate not verified"
    return Finding(PASS, "tls", f"encrypted ({cipher}, {checked})")


def _start_finding(query, info, v, start: Start, where: str) -> Finding:
    try:
        preflight.check_start(query, info, v, start, where=where)
    except CdcError as e:
        return Finding(FAIL, "start", str(e), type(e))
    return Finding(PASS, "start", f"{start.describe()} is on the server")


def _table_findings(everything: list[str], include: Sequence[str], exclude: Sequence[str],
                    where: str, account: str, option: str = "includeTables",
                    ) -> tuple[list[str], list[Finding]]:
    """The captured tables, and a finding per include pattern that matches nothing (FAIL for
    a name, WARN for a glob) or one that says what is captured."""
    excluded = [p.lower() for p in exclude]
    kept = [t for t in everything
            if not any(fnmatch.fnmatchcase(t.lower(), p) for p in excluded)]
    if not include:
        return kept, [Finding(PASS, "tables", f"all {len(kept)} tables are captured"
                                              + (f": {_names(kept)}" if kept else ""))]
    tables, out = [], []
    for pattern in include:
        hits = [t for t in kept if fnmatch.fnmatchcase(t.lower(), pattern.lower())]
        tables += [t for t in hits if t not in tables]
        if hits:
            continue
        if _is_glob(pattern):
            out.append(Finding(WARN, "tables", f"{option} pattern {pattern!r} matches no "
                                               f"table on {where} (yet) that {account} can see",
                               ConfigurationError))
            continue
        hint = did_you_mean(pattern, everything)
        out.append(Finding(FAIL, "tables", (
            f"{option} names {pattern}, which {where} does not have{hint}, or {account} "
            f"cannot see it (no privilege on it): fix the name, or GRANT SELECT ON {pattern} "
            f"TO {account}"), ConfigurationError))
    if tables:
        out.insert(0, Finding(PASS, "tables", f"{option} matches {len(tables)} table(s): "
                                              f"{_names(tables)}"))
    return sorted(tables), out


def _select_finding(query, tables: list[str], include: Sequence[str], info,
                    account: str) -> Finding:
    """SELECT on every captured table (what the snapshot reads)."""
    if not tables:
        dbs = sorted({p.split(".")[0] for p in include if "." in p and not _is_glob(
            p.split(".")[0])}) or ["*"]
        return Finding(WARN, "privileges (snapshot)", (
            f"{account} sees no table to snapshot; it needs SELECT on the captured tables: "
            + "; ".join(f"GRANT SELECT ON {d if d == '*' else quote_name(d)}.* TO {account}"
                        for d in dbs)), PrivilegeError)
    refused = []
    for t in tables:
        db, _, name = t.partition(".")
        try:
            query(f"SELECT 1 FROM {quote_name(db)}.{quote_name(name)} LIMIT 0")
        except Exception as e:  # noqa: BLE001 - a refusal is the finding, any other error too
            refused.append(f"{t} ({e.args[-1] if e.args else e})")
    if refused:
        return Finding(FAIL, "privileges (snapshot)", (
            f"{account} may not read {_names(refused)}, which the snapshot reads: GRANT SELECT "
            f"ON the tables TO {account}"), PrivilegeError)
    return Finding(PASS, "privileges (snapshot)", f"{account} may read the {len(tables)} "
                                                  f"captured table(s)")


def _key_finding(query, tables: list[str], upsert: bool) -> Finding:
    keyed = {f"{s}.{t}" for s, t in query(_KEYED_SQL)}
    keyless = [t for t in tables if t not in keyed]
    if not keyless:
        return Finding(PASS, "keys", "every captured table has a primary key")
    if upsert:
        return Finding(FAIL, "keys", (
            f"{_names(keyless)} ha{'s' if len(keyless) == 1 else 've'} no primary key, which "
            f"a sink that upserts needs to match changes to rows: add one (ALTER TABLE ... ADD "
            f"PRIMARY KEY), or leave the table out with excludeTables"), ConfigurationError)
    return Finding(WARN, "keys", (
        f"{_names(keyless)} ha{'s' if len(keyless) == 1 else 've'} no primary key: "
        f"{'its' if len(keyless) == 1 else 'their'} changes carry no key, and a snapshot reads "
        f"{'it' if len(keyless) == 1 else 'each'} in one chunk (add a primary key, or name key "
        f"columns with snapshotKeys)"), ConfigurationError)


def require(findings: Iterable[Finding]) -> list[Finding]:
    """Raise the FAILs (:func:`~cdc.replica.preflight.raise_failures`); return the findings. A
    first connection that failed with an error a retry may mend (a timeout, a server starting
    up; not a refused connection or an unknown host) is left to the caller's retries."""
    findings = list(findings)
    first = findings[0] if findings else None
    if first is not None and first.check == "connection" and first.status == FAIL and \
            issubclass(first.error, TransientServerError) and \
            not issubclass(first.error, ServerUnreachableError):
        return []
    preflight.raise_failures(findings)
    return findings


def render(findings: Iterable[Finding]) -> list[str]:
    """One line per finding: ``PASS  binlog_format          binlog_format is ROW``."""
    return [f"{f.status}  {f.check:<22} {f.message}" for f in findings]


def exit_status(findings: Iterable[Finding]) -> int:
    """2 when anything FAILed, else 0."""
    return 2 if any(f.status == FAIL for f in findings) else 0

