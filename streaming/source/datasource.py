"""The ``binlog-cdc`` PySpark data source: MySQL/MariaDB row changes as a DataFrame.

Streaming (a live server, over the replication protocol)::

    df = (spark.readStream.format("binlog-cdc")
          .option("host", "db.example").option("port", 3306)
          .option("user", "cdc").option("passwordFile", "/run/secrets/cdc")
          .option("serverId", 4242)                      # connections use 4242 .. 4242+1024
          .option("startingPosition", "earliest")         # or latest, {"file":..,"pos":..}, {"gtid":..}
          .option("includeTables", "shop.*").option("maxEventsPerTrigger", 50000)
          .load())

Batch (archived binlog files, :mod:`streaming.source.files`)::

    df = spark.read.format("binlog-cdc").load("/backups/binlogs/mysql-bin.*")

Both give the schema documented in :mod:`streaming.contract.spark_schema`. The options are listed in
:mod:`streaming.source.options`.

How a stream works
------------------
* The stream reader is :mod:`streaming.source.stream_reader`. Offsets are transaction boundaries
  (:mod:`streaming.contract.envelope`); the planning arithmetic
  is in :mod:`streaming.source.planning`, the driver's server queries in :mod:`streaming.source.driver`.
* The driver-side reader only tracks positions: the end of the binlog (``SHOW BINARY LOG
  STATUS``, ``SHOW MASTER STATUS`` before MySQL 8.2), and the boundaries of the transactions
  after the last offset (one non-blocking replication connection reads them; row images are not
  decoded unless ``maxEventsPerTrigger`` needs the number of rows).
* ``partitions(start, end)`` cuts the range into chunks at transaction boundaries: one per binlog
  file at least, and files split into byte-balanced chunks (``minPartitions``,
  ``maxBytesPerPartition``). Each chunk is read by a task over its own replication connection
  (``serverId + 1 + chunk index``), from the chunk start until the chunk end, and decoded there
  into Arrow record batches. A replayed batch (after a restart) is planned from the file list
  alone: one chunk per file.
* MySQL GTID offsets carry the GTID set executed up to the boundary, but the driver and the
  tasks read by file and position: a transaction whose GTID is already in the set at the batch
  start (a ``{"gtid": ...}`` start set with gaps, or another server's order of the same
  transactions) is skipped, as ``COM_BINLOG_DUMP_GTID`` would skip it.
* Failover: an offset read from another server resumes by its GTID state, never by its file
  position, and a server lacking transactions it delivered is refused
  (:mod:`streaming.source.driver`).
* Transactions of other tables only (:func:`streaming.source.planning.holds_quiet`) hold the offset
  until ``idleAdvanceBytes`` of them wait or ``idleAdvanceIntervalMs`` passed (a busy other
  database makes no micro-batch per trigger); a batch's tasks do not read them first.
* Purged binlogs (option ``onDataLoss``): ``fail`` (default) stops the query with an error
  naming the missing file; ``skip`` skips the purged range (a warning is logged);
  ``resnapshot`` re-reads the captured tables from the binlog end (see
  :mod:`streaming.source.snapshot`).
* The schema history (column names, charsets... of tables whose table maps lack them) is kept
  by the driver, carried in the offsets and given to each chunk as of its start: a restarted
  query decodes with the tables' shapes of its checkpoint's position
  (:mod:`streaming.source.schema_history`).
* XA transactions (:mod:`cdc.binlog.xa`): a prepared one is delivered in the batch of its XA
  COMMIT, at the commit's place (``seq``, ``source``); an offset past an undecided XA PREPARE
  names it (``"xa"``), and the task whose chunk holds the decision reads the prepared
  transaction again (:func:`streaming.source.planning.decided_in`). A replayed batch over several
  files is scanned by the driver first, to know what is held where its files start.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from cdc.errors import ConfigurationError

from streaming.contract.spark_schema import (JSON_SCHEMA, typed_schema, with_fields,
                                             with_schema_changes)
from streaming.source.options import SourceOptions
from streaming.source.spark_errors import user_errors
from streaming.source.worker_heap import settle

# Spark imports this module in every Python worker it starts (the source's lookup, its
# creation, the stream's driver-side reader, planning, the tasks), one after the other before a
# query's first batch: what only some of them need is imported where it is used (the stream
# reader: streaming.source.stream_reader).


# ===================================================================================================
# the data source
# ===================================================================================================


@user_errors
class BinlogCdcDataSource(DataSource):
    """``format("binlog-cdc")``: see the module docstring, :mod:`streaming.contract.spark_schema` (the schema)
    and :mod:`streaming.source.options` (the options)."""

    @classmethod
    def name(cls) -> str:
        return "binlog-cdc"

    def __init__(self, options):
        super().__init__(options)
        settle()    # PySpark's planning workers collect everything after each call: see worker_heap
        self._opts: SourceOptions | None = None
        self._columns = None
        self._schema_point = None   # typed stream: the binlog end when its columns were read

    @property
    def opts(self) -> SourceOptions:
        if self._opts is None:
            self._opts = SourceOptions.parse(self.options)
        return self._opts

    def _typed_columns(self, streaming: bool):
        opts = self.opts
        if not opts.table:
            return None
        if self._columns is None:
            db, table = opts.table.split(".")
            if streaming or not opts.paths:
                from cdc.replica.sql import ask_on, binlog_status, connect

                from streaming.contract.tables import columns_from_server
                opts.check_connection()
                conn = connect(opts.replica_config())
                try:
                    # DDL from here on changes the shape after it was read (typed mode stops)
                    end = ask_on(conn, binlog_status, opts.replica_config())
                    self._schema_point = (end.file, end.pos)
                    self._columns = columns_from_server(conn, db, table)
                finally:
                    conn.close()
            else:
                from streaming.source.files import columns_from_files
                self._columns = columns_from_files(opts, db, table)
        return self._columns

    def schema(self):
        opts = self.opts
        schema = JSON_SCHEMA
        if opts.table:
            from streaming.contract.flat import flat_schema
            columns = self._typed_columns(streaming=not opts.paths)
            schema = flat_schema(columns) if opts.layout == "flat" else \
                typed_schema(columns, tuple(opts.table.split(".")))
        schema = with_fields(schema, opts.fields)
        settle()    # what the columns' lookup imported
        return with_schema_changes(schema) if opts.include_schema_changes else schema

    def reader(self, schema: StructType):
        if self.opts.layout == "flat":     # the readers build the typed envelope, then flatten
            from streaming.source.flat_reader import FlatBatchReader
            columns = self._typed_columns(streaming=not self.opts.paths)
            reader = FlatBatchReader(self._reader(typed_schema(columns)), columns)
        else:
            reader = self._reader(schema)
        settle()    # the planning worker's imports, out of its collection after this call
        return reader

    def _reader(self, schema: StructType):
        opts = self.opts
        if not opts.paths and opts.host and opts.ending is not None:
            from streaming.source.bounded import BoundedBatchReader
            from streaming.source.stream_reader import BinlogStreamReader
            # startingPosition .. endingPosition of a live server, read like the stream
            opts.check_connection()
            columns = self._typed_columns(streaming=True)
            return BoundedBatchReader(BinlogStreamReader(opts, schema, columns,
                                                         self._schema_point))
        if not opts.paths and opts.host:
            # a one-off read of the tables of a live server (a snapshot)
            from streaming.source import snapshot
            return snapshot.SnapshotBatchReader(opts, schema, self._typed_columns(streaming=True))
        if not opts.paths:
            raise ConfigurationError("a batch read of binlog-cdc needs files "
                                     "(spark.read.format('binlog-cdc').load('/path/mysql-bin.*')) "
                                     "or a server (option host: a snapshot of its tables)")
        from streaming.source.files import FileBatchReader
        return FileBatchReader(opts, schema, self._typed_columns(streaming=False))

    def streamReader(self, schema: StructType):
        from streaming.source.stream_reader import BinlogStreamReader
        opts = self.opts
        opts.check_connection()
        columns = self._typed_columns(streaming=True)
        if opts.layout == "flat":     # read() builds the typed envelope, then flattens
            schema = typed_schema(columns)
        reader = BinlogStreamReader(opts, schema, columns, self._schema_point)
        settle()    # the planning worker's imports, out of its collection after this call
        return reader
