"""Options of the ``binlog-cdc`` Spark source, parsed and checked once.

Spark hands the options over with lower-cased keys; they are matched case-insensitively, so
``maxEventsPerTrigger`` and ``maxeventspertrigger`` are the same option. An unknown option is an
error that lists the valid ones (a typo must not be silently ignored).

The password (``password``, ``passwordFile`` or the ``BINLOG_CDC_PASSWORD`` environment
variable, in that order) is held in a :class:`Secret`: its ``repr``/``str`` is ``***``, so it
cannot leak through logs, reprs, plans or exception messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping

from cdc.errors import ConfigurationError, did_you_mean
from cdc.positions import Start
from cdc.snapshot import SNAPSHOT_BATCH_ROWS
from cdc.replica.config import (ON_UNPARSED_DDL, PASSWORD_ENV, ReplicaConfig, RetryPolicy,
                                Secret, SslOptions, random_server_id, read_password)

from streaming.contract.envelope import ENVELOPE_FIELDS

if TYPE_CHECKING:
    from cdc.binlog.transactions import TableFilter

#: Where the source's password is set, named by an authentication error.
PASSWORD_HINT = f"the Spark options password or passwordFile, or {PASSWORD_ENV} in the " \
    f"driver's and executors' environment"

#: How tasks and the driver's replication connections reconnect, and (the same budget, first
#: connections included: a task's client is new) how the driver's SQL session rides out an
#: outage of the source.
TASK_RETRY = RetryPolicy(max_attempts=10, max_time=120, initial_backoff=0.2, max_backoff=5,
                         first_connect_time=120, retry_unreachable_first=True)

#: where an option applies (the options table's "Applies to" column)
STREAM, BATCH, SNAPSHOT = "stream", "batch", "snapshot"
_ALL = (STREAM, BATCH, SNAPSHOT)


@dataclass(frozen=True)
class Option:
    """What a user reads about one option (docs/source.md's options table is made from these:
    ``python -m tools.docs``). *required*: when it must be given ("" never); *default* as the
    user would write it ("" none); *applies*: stream (readStream from a server), batch
    (spark.read of binlog files, or of a server with endingPosition), snapshot
    (startingPosition=snapshot, or spark.read of a server without endingPosition)."""

    type: str
    default: str
    applies: tuple
    meaning: str
    required: str = ""


_SERVER = (STREAM, BATCH, SNAPSHOT)          # everything that connects to a server
_DECODE = (STREAM, BATCH)                    # everything that reads the binlog

#: every option of the source, in the order of the "valid options" list in errors
OPTIONS: dict[str, Option] = {
    "host": Option("string", "", _SERVER, "the server's host name", "stream, snapshot"),
    "port": Option("int", "3306", _SERVER, "the server's port"),
    "user": Option("string", "", _SERVER, "the account (grants: docs/server-setup.md)",
                   "with host"),
    "password": Option("string", "$BINLOG_CDC_PASSWORD", _SERVER,
                       "the account's password; never shown in logs, plans or errors"),
    "passwordFile": Option("path", "", _SERVER, "a file holding the password (first line)"),
    "serverId": Option("int", "random", _SERVER,
                       "replica server_id; tasks use serverId+1 .. serverId+1024"),
    "startingPosition": Option(
        "string / JSON", "latest", _ALL,
        "earliest, latest, snapshot (read the tables, the binlog along), "
        "{\"file\": \"mysql-bin.000042\", \"pos\": 4}, or {\"gtid\": ...} with a MariaDB "
        "GTID position (0-1-42) or a MySQL GTID set"),
    "snapshotChunkRows": Option("int", "50000", (SNAPSHOT,),
                                "rows per chunk (one Spark task, one short transaction each)"),
    "snapshotRowsPerTrigger": Option(
        "int", str(SNAPSHOT_BATCH_ROWS), (SNAPSHOT,),
        "snapshot rows per micro-batch at most (maxEventsPerTrigger when lower); each batch "
        "reads the binlog along, so binlogs must be kept for one batch's time, not the whole "
        "snapshot's (docs/guarantees.md)"),
    "signalTable": Option("db.table", "", (STREAM,),
                          "a table whose inserted rows (a column table_name = 'db.t') make "
                          "the running stream re-snapshot that table"),
    "snapshotKeys": Option("JSON", "", (SNAPSHOT,),
                           "{\"db.table\": [\"col\", ...]}: the columns to chunk a table by "
                           "(default: its primary key, else its smallest unique NOT NULL key)"),
    "includeTables": Option("globs", "all", _ALL, "comma-separated db.table globs to capture"),
    "excludeTables": Option("globs", "", _ALL, "comma-separated db.table globs to leave out"),
    "table": Option("db.table", "", _ALL,
                    "typed mode: before/after as structs of that table's Spark types "
                    "(docs/types.md); excludes includeTables"),
    "layout": Option("string", "envelope", _ALL,
                     "envelope or flat: with table, the table's columns at the top level "
                     "plus _cdc_* change metadata (AutoCDC/MERGE-ready)"),
    "maxEventsPerTrigger": Option("int", "", (STREAM, SNAPSHOT),
                                  "row changes per micro-batch at most (whole transactions; "
                                  "also with availableNow)"),
    "maxBytesPerTrigger": Option("int", "", (STREAM,),
                                 "binlog bytes per micro-batch at most (whole transactions)"),
    "minPartitions": Option("int", "1", _ALL, "tasks per micro-batch at least (1 .. 1024)"),
    "maxBytesPerPartition": Option("int", "16777216", _DECODE, "binlog bytes per task at most"),
    "idleAdvanceIntervalMs": Option("int", "60000", (STREAM,),
                                    "while only other tables change, the offset moves past "
                                    "their transactions (an empty micro-batch) this often; "
                                    "0: at every trigger"),
    "idleAdvanceBytes": Option("int", "16777216", (STREAM,),
                               "... or once this many binlog bytes of them wait (about what "
                               "a restart reads again at most)"),
    "onDataLoss": Option("string", "fail", _DECODE,
                         "the binlog the query needs was purged: fail stops the query; skip "
                         "skips the purged range with a warning (a purged start file: start at "
                         "the oldest file the server has); resnapshot re-reads the captured "
                         "tables from the binlog end and goes on from there, replacing their "
                         "rows in the sink (an op t record, then op r rows; "
                         "docs/guarantees.md)"),
    "failOnDataLoss": Option("bool", "true", _DECODE,
                             "the older spelling of onDataLoss: true is fail, false is skip "
                             "(both given: they must agree)"),
    "heartbeatIntervalMs": Option("int", "10000", _DECODE, "replication heartbeat period"),
    "connectTimeoutMs": Option("int", "10000", _SERVER, "connect timeout"),
    "maxRetries": Option("int", "10", _SERVER,
                         "connection attempts in a row (driver and tasks) before the query "
                         "fails; backoff 0.2 s .. 5 s"),
    "maxRetryTimeMs": Option("int", "120000", _SERVER,
                             "time spent reconnecting before the query fails"),
    "sslCa": Option("path", "", _SERVER, "TLS: the CA that signed the server's certificate"),
    "sslCert": Option("path", "", _SERVER, "TLS: a client certificate"),
    "sslKey": Option("path", "", _SERVER, "TLS: the client certificate's key"),
    "sslVerify": Option("bool", "", _SERVER,
                        "older spelling: true is sslMode=verify_ca; not with sslMode"),
    "sslMode": Option("string", "preferred", _SERVER,
                      "TLS: disabled, preferred, required, verify_ca, verify_identity "
                      "(docs/source.md#tls)"),
    "path": Option("path / URL", "", (BATCH,),
                   "binlog file(s), directory, .index file or glob, local or s3://, gs://, "
                   "abfs://, hdfs://, file:// (also load(path))", "batch from files"),
    "paths": Option("JSON list", "", (BATCH,), "several of those (set by load([...]))"),
    "endingPosition": Option("string / JSON", "", (BATCH,),
                             "with host: a bounded read from startingPosition up to latest, "
                             "{\"file\": ..., \"pos\": ...} or {\"gtid\": ...}; without it a "
                             "batch read of a server is the snapshot"),
    "fields": Option("list", "all", _ALL,
                     "the envelope columns to deliver, comma-separated (op is always one); "
                     "columns not named are not built (DeltaUpserter reads "
                     "op,db,table,before,after,seq)"),
    "includeSchemaChanges": Option("bool", "false", (STREAM, SNAPSHOT),
                                   "DDL statements that change captured tables are rows too "
                                   "(op s, an extra column schema_change); needs host and the "
                                   "envelope layout"),
    "schemaHistory": Option("bool", "true", (STREAM, SNAPSHOT),
                            "follow the tables' shapes along the binlog's DDL; false: "
                            "complete table maps from today's information_schema"),
    "onUnparsedDdl": Option("string", "fail", (STREAM, SNAPSHOT),
                            "a DDL statement on a captured table that cannot be parsed: fail, "
                            "skip (keep the table's shape) or reseed (read it again)"),
    "rowDecoder": Option("string", "auto", _DECODE,
                         "c, python or auto: the tasks' row decoder (default: each "
                         "executor's BINLOG_CDC_DECODER, else auto)"),
    "fs.<scheme>.<name>": Option("string", "", (BATCH,),
                                 "filesystem settings of URL paths: fs.s3.endpoint, "
                                 "fs.s3.accessKey, fs.s3.secretKey, fs.s3.sessionToken, "
                                 "fs.s3.region, fs.s3.anonymous, fs.s3.pathStyle; any other "
                                 "name is a keyword of the pyarrow.fs class"),
}
_BY_LOWER = {k.lower(): k for k in OPTIONS}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(name: str, text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ConfigurationError(f"option {name} must be true or false, not {text!r}")


def _int(name: str, text: str, lo: int | None = None, hi: int | None = None) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        raise ConfigurationError(f"option {name} must be an integer, not {text!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise ConfigurationError(f"option {name} must be {rng}, not {v}")
    return v


def _globs(text: str | None) -> list[str]:
    if not text:
        return []
    return [p.strip() for p in text.split(",") if p.strip()]


@dataclass(frozen=True)
class SourceOptions:
    """Every option of the source, typed. Build with :meth:`parse`."""

    host: str | None = None
    port: int = 3306
    user: str | None = None
    password: Secret = field(default_factory=lambda: Secret(""), repr=False)
    server_id: int = 0
    starting: Start = field(default_factory=Start.latest)
    snapshot: bool = False
    snapshot_chunk_rows: int = 50000
    snapshot_rows_per_trigger: int = SNAPSHOT_BATCH_ROWS
    snapshot_keys: dict = field(default_factory=dict)
    signal_table: str | None = None
    include_tables: tuple = ()
    exclude_tables: tuple = ()
    table: str | None = None
    layout: str = "envelope"
    max_events: int | None = None
    max_bytes: int | None = None
    min_partitions: int = 1
    max_bytes_per_partition: int = 16 << 20
    idle_advance_s: float = 60.0
    idle_advance_bytes: int = 16 << 20
    on_data_loss: str = "fail"        # ON_DATA_LOSS
    heartbeat_s: float = 10.0
    connect_timeout_s: float = 10.0
    retry: RetryPolicy = TASK_RETRY
    ssl: SslOptions | bool | None = None
    paths: tuple = ()
    ending: Start | None = None
    row_decoder: str | None = None
    include_schema_changes: bool = False
    fields: tuple | None = None       # the envelope columns delivered (None: all)
    schema_history: bool = True
    on_unparsed_ddl: str = "fail"
    storage: dict = field(default_factory=dict, repr=False)   # fs.<scheme>.<name> settings

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> "SourceOptions":
        raw: dict[str, str] = {}
        storage: dict = {}
        for k, v in dict(options).items():
            if str(k).lower().startswith("fs."):
                storage[str(k).lower()] = str(v)
                continue
            canon = _BY_LOWER.get(str(k).lower())
            if canon is None:
                valid = ", ".join(OPTIONS)
                raise ConfigurationError(f"unknown option {k!r} for the binlog-cdc source"
                                         f"{did_you_mean(k, OPTIONS)}; valid options are: {valid}")
            raw[canon] = v
        get = raw.get
        kw: dict = {}
        if get("host"):
            kw["host"] = get("host").strip()
        if get("port"):
            kw["port"] = _int("port", get("port"), 1, 65535)
        if get("user"):
            kw["user"] = get("user")
        kw["password"] = _password(raw)
        if get("serverId"):
            kw["server_id"] = _int("serverId", get("serverId"), 1, (1 << 32) - 1 - 1024)
        else:
            kw["server_id"] = random_server_id(1 << 30, (1 << 32) - 2049)
        if str(get("startingPosition") or "").strip().lower() == "snapshot":
            kw["snapshot"] = True            # from the binlog end taken before the snapshot
        else:
            try:
                kw["starting"] = Start.parse(get("startingPosition"), option="startingPosition")
            except ConfigurationError as e:
                raise ConfigurationError(f"{e}; or snapshot (read the tables first)") from None
        if get("snapshotChunkRows"):
            kw["snapshot_chunk_rows"] = _int("snapshotChunkRows", get("snapshotChunkRows"), 1)
        if get("snapshotRowsPerTrigger"):
            kw["snapshot_rows_per_trigger"] = _int("snapshotRowsPerTrigger",
                                                   get("snapshotRowsPerTrigger"), 1)
        if get("signalTable"):
            t = get("signalTable").strip()
            if t.count(".") != 1 or "*" in t:
                raise ConfigurationError(f"option signalTable must name one table as db.table, "
                                         f"not {t!r}")
            kw["signal_table"] = t
        if get("snapshotKeys"):
            kw["snapshot_keys"] = _snapshot_keys(get("snapshotKeys"))
        kw["include_tables"] = tuple(_globs(get("includeTables")))
        kw["exclude_tables"] = tuple(_globs(get("excludeTables")))
        if get("table"):
            t = get("table").strip()
            if t.count(".") != 1 or t.startswith(".") or t.endswith(".") or "*" in t:
                raise ConfigurationError(f"option table must name one table as db.table, "
                                         f"not {t!r}")
            if kw["include_tables"]:
                raise ConfigurationError("options table and includeTables exclude each other: "
                                         "table already selects the one table to read")
            kw["table"] = t
        if get("layout"):
            kw["layout"] = get("layout").strip().lower()
            if kw["layout"] not in ("envelope", "flat"):
                raise ConfigurationError(f"option layout must be envelope or flat, not "
                                         f"{get('layout')!r}")
            if kw["layout"] == "flat" and not kw.get("table"):
                raise ConfigurationError("option layout=flat needs option table=db.t (the flat "
                                         "layout has that table's columns)")
        if get("fields") is not None:
            kw["fields"] = _fields(get("fields"), kw.get("layout"))
        if get("maxEventsPerTrigger"):
            kw["max_events"] = _int("maxEventsPerTrigger", get("maxEventsPerTrigger"), 1)
        if get("maxBytesPerTrigger"):
            kw["max_bytes"] = _int("maxBytesPerTrigger", get("maxBytesPerTrigger"), 1)
        if get("minPartitions"):
            kw["min_partitions"] = _int("minPartitions", get("minPartitions"), 1, 1024)
        if get("maxBytesPerPartition"):
            kw["max_bytes_per_partition"] = _int("maxBytesPerPartition",
                                                 get("maxBytesPerPartition"), 1)
        if get("idleAdvanceIntervalMs"):
            kw["idle_advance_s"] = _int("idleAdvanceIntervalMs", get("idleAdvanceIntervalMs"),
                                        0) / 1000
        if get("idleAdvanceBytes"):
            kw["idle_advance_bytes"] = _int("idleAdvanceBytes", get("idleAdvanceBytes"), 0)
        kw["on_data_loss"] = _on_data_loss(get)
        if get("heartbeatIntervalMs"):
            kw["heartbeat_s"] = _int("heartbeatIntervalMs", get("heartbeatIntervalMs"), 1) / 1000
        if get("connectTimeoutMs"):
            kw["connect_timeout_s"] = _int("connectTimeoutMs", get("connectTimeoutMs"), 1) / 1000
        if get("maxRetries") or get("maxRetryTimeMs"):
            t = _int("maxRetryTimeMs", get("maxRetryTimeMs"), 1) / 1000 \
                if get("maxRetryTimeMs") else TASK_RETRY.max_time
            kw["retry"] = replace(TASK_RETRY, max_time=t, first_connect_time=t, max_attempts=(
                _int("maxRetries", get("maxRetries"), 1) if get("maxRetries")
                else TASK_RETRY.max_attempts))
        kw["ssl"] = _ssl(get)
        paths: list[str] = []
        if get("path"):
            paths.append(get("path"))
        if get("paths"):
            try:
                more = json.loads(get("paths"))
            except ValueError:
                more = [get("paths")]
            paths += [str(p) for p in (more if isinstance(more, list) else [more])]
        kw["paths"] = tuple(paths)
        if get("endingPosition"):
            kw["ending"] = Start.parse(get("endingPosition"), option="endingPosition")
            if kw["ending"].kind == "earliest":
                raise ConfigurationError("option endingPosition must be latest, a file/pos or a "
                                         "GTID set, not earliest")
        if get("rowDecoder"):
            kw["row_decoder"] = str(get("rowDecoder")).strip().lower()
            if kw["row_decoder"] not in ("auto", "c", "python"):
                raise ConfigurationError(f"option rowDecoder must be c, python or auto, not "
                                         f"{get('rowDecoder')!r}")
        _schema_options(get, kw)
        from streaming.source.storage import storage_settings     # (binlog files: a batch)
        kw["storage"] = storage_settings(storage)
        opts = cls(**kw)
        if streaming:
            opts.check_connection()
        return opts

    def snapshot_batch_rows(self, limit: int | None = None) -> int:
        """The snapshot rows of one micro-batch at most: ``snapshotRowsPerTrigger``, or the
        read limit *limit* (default ``maxEventsPerTrigger``) when lower."""
        limit = limit or self.max_events
        return min(self.snapshot_rows_per_trigger, limit or self.snapshot_rows_per_trigger)

    @property
    def fail_on_data_loss(self) -> bool:
        """Whether lost binlog is an error where it is met (``onDataLoss`` fail; resnapshot
        too where no re-snapshot can start: a task, a ``startingPosition``)."""
        return self.on_data_loss != "skip"

    def check_connection(self) -> None:
        if not self.host:
            raise ConfigurationError("the binlog-cdc stream needs option host (and port, user, "
                                     "password or passwordFile)")
        if not self.user:
            raise ConfigurationError("the binlog-cdc stream needs option user (an account with "
                                     "REPLICATION SLAVE and REPLICATION CLIENT; MariaDB "
                                     "10.5.2+: REPLICATION SLAVE, BINLOG MONITOR and "
                                     "REPLICATION MASTER ADMIN)")

    def replica_config(self, server_id: int | None = None) -> ReplicaConfig:
        """The :class:`ReplicaConfig` of these options (the one place Spark options become
        connection settings); *server_id* defaults to ``serverId``."""
        self.check_connection()
        return ReplicaConfig(
            self.host, self.port, self.user, self.password,
            server_id=server_id if server_id is not None else self.server_id,
            ssl=self.ssl, connect_timeout=self.connect_timeout_s,
            heartbeat_interval=self.heartbeat_s, retry=self.retry,
            table_filter=self.table_filter(), check_server_id=False,
            row_decoder=self.row_decoder,
            schema_history=self.schema_history, on_unparsed_ddl=self.on_unparsed_ddl,
            # typed mode stops at a change of its table's shape: it needs the records too
            include_schema_changes=self.schema_history and (self.include_schema_changes or
                                                            bool(self.table)),
            password_hint=PASSWORD_HINT)

    def table_filter(self) -> TableFilter | None:
        # (imported here: every Spark Python worker imports this module, few filter tables)
        from cdc.binlog.transactions import TableFilter
        include = [self.table] if self.table else list(self.include_tables)
        if include and self.signal_table:
            include.append(self.signal_table)      # its rows are read (and delivered) too
        f = TableFilter(include, list(self.exclude_tables))
        return f if f else None

    def describe(self) -> str:
        """For messages: where, as whom (never the password)."""
        return f"{self.user}@{self.host}:{self.port}"


def _schema_options(get, kw: dict) -> None:
    """includeSchemaChanges, schemaHistory, onUnparsedDdl (and how they combine)."""
    if get("schemaHistory") is not None:
        kw["schema_history"] = _bool("schemaHistory", get("schemaHistory"))
    if get("onUnparsedDdl") is not None:
        v = str(get("onUnparsedDdl")).strip().lower()
        if v not in ON_UNPARSED_DDL:
            raise ConfigurationError(f"option onUnparsedDdl must be fail, skip or reseed, not "
                                     f"{get('onUnparsedDdl')!r}")
        kw["on_unparsed_ddl"] = v
    if get("includeSchemaChanges") is not None:
        kw["include_schema_changes"] = _bool("includeSchemaChanges", get("includeSchemaChanges"))
    if not kw.get("include_schema_changes"):
        return
    if not kw.get("schema_history", True):
        raise ConfigurationError("option includeSchemaChanges=true needs the schema history: "
                                 "remove schemaHistory=false (the records are what the history "
                                 "follows)")
    if kw.get("layout") == "flat":
        raise ConfigurationError("option includeSchemaChanges=true needs layout=envelope (the "
                                 "flat layout has no place for schema-change rows)")
    if kw.get("paths"):
        raise ConfigurationError("option includeSchemaChanges=true needs host: binlog files read "
                                 "with path have no schema history; read from the server (a "
                                 "stream, or a bounded read with endingPosition)")


#: the values of option onDataLoss
ON_DATA_LOSS = ("fail", "skip", "resnapshot")


def _on_data_loss(get) -> str:
    """Option ``onDataLoss``, or its older spelling ``failOnDataLoss`` (true: fail, false:
    skip); both given, they must agree."""
    old = get("failOnDataLoss")
    old = None if old is None else ("fail" if _bool("failOnDataLoss", old) else "skip")
    new = get("onDataLoss")
    if new is None:
        return old or "fail"
    new = str(new).strip().lower()
    if new not in ON_DATA_LOSS:
        raise ConfigurationError(f"option onDataLoss must be fail, skip or resnapshot, not "
                                 f"{get('onDataLoss')!r}")
    if old is not None and old != new:
        raise ConfigurationError(f"options onDataLoss={new} and failOnDataLoss="
                                 f"{get('failOnDataLoss')} disagree: keep onDataLoss only")
    return new


def _fields(text: str, layout: str | None) -> tuple:
    """Option ``fields``: envelope column names (checked against :data:`ENVELOPE_FIELDS`; the
    schema keeps the envelope's order, and ``schema_change`` with ``includeSchemaChanges``)."""
    names = _globs(text)
    wrong = [n for n in names if n not in ENVELOPE_FIELDS]
    if wrong or not names:
        what = f"{', '.join(wrong)} is not an envelope column" if wrong else "names no column"
        raise ConfigurationError(f"option fields: {what}; choose among "
                                 f"{','.join(ENVELOPE_FIELDS)}")
    if layout == "flat":
        raise ConfigurationError("option fields needs layout=envelope (the flat layout has the "
                                 "table's columns, not the envelope's)")
    return tuple(n for n in ENVELOPE_FIELDS if n in names or n == "op")


def _ssl(get) -> SslOptions | bool | None:
    """TLS from ``sslMode`` (:meth:`SslOptions.from_mode`) or the older ``sslVerify``, with
    ``sslCa``/``sslCert``/``sslKey``."""
    files = {key: get(opt) or None for opt, key in (("sslCa", "ca"), ("sslCert", "cert"),
                                                     ("sslKey", "key"))}
    if get("sslMode") is not None:
        if get("sslVerify") is not None:
            raise ConfigurationError("options sslMode and sslVerify exclude each other: use "
                                     "sslMode=verify_ca (or verify_identity, or required)")
        return SslOptions.from_mode(get("sslMode"), option="sslMode", **files)
    ssl = {k: v for k, v in files.items() if v}
    if get("sslVerify") is not None:
        ssl["verify"] = _bool("sslVerify", get("sslVerify"))
    return SslOptions.coerce(ssl) if ssl else None


def _snapshot_keys(text: str) -> dict:
    try:
        keys = json.loads(text)
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(
            isinstance(k, str) and k.count(".") == 1 and isinstance(v, list) and v
            and all(isinstance(c, str) and c for c in v) for k, v in keys.items()):
        raise ConfigurationError(f"option snapshotKeys must be a JSON object of db.table -> list "
                                 f"of column names, e.g. {{\"shop.orders\": [\"id\"]}}, not "
                                 f"{text!r}")
    return keys


def _password(raw: dict) -> Secret:
    return read_password(raw.get("password"), raw.get("passwordFile"), file_option="passwordFile")
