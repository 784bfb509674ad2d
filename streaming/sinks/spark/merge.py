"""Upserting a ``binlog-cdc`` stream into Delta or Iceberg tables with Spark's own ``MERGE``,
from ``foreachBatch``: the batch stays on the executors (nothing of its rows is collected to the
driver)::

    from streaming.sinks.spark import SparkMerge

    merge = SparkMerge("/data/delta", format="delta", app_id="orders-cdc",
                       host="db.example", user="cdc", password=secret)
    (spark.readStream.format("binlog-cdc").option(...).load()
         .writeStream.foreachBatch(merge).option("checkpointLocation", "/chk/orders").start())

``format="delta"`` (delta-spark): one table per source table at ``<target>/<db>/<table>``;
``format="iceberg"`` (the Iceberg Spark runtime): ``<target>.<db>.<table>``, *target* a catalog
(or ``catalog.namespace``) of the session. The session needs the connector's jars and catalog
settings (:func:`streaming.apps.local_spark.local_spark`'s ``formats``; ``docs/sinks.md``).

The semantics are :class:`streaming.sinks.delta.upserter.DeltaUpserter`'s, from the same plan
(:mod:`streaming.sinks.plan`): the last change per primary key in ``seq`` order (a primary-key
change is a delete of the old key and a write of the new one), the changes before a table's last
``TRUNCATE`` superseded (the MERGE then also deletes every row the changes after it do not
write), the DDL of ``includeSchemaChanges`` applied in order as schema evolution (columns added,
renamed, dropped: ``ALTER TABLE`` on the target, row images before a DDL read under their old
names), keyless tables refused.

What reaches the driver: one aggregate row per source table of the batch (its name and its
TRUNCATE and schema-change records), and the targets' metadata. The rows go from the source's
partitions through ``from_json``, a window (last change per key) and the MERGE's join on the
executors.

Exactly once: Delta: the MERGE runs with the writer settings ``txnAppId`` = ``app_id`` and
``txnVersion`` = the batch id (delta-spark skips a batch already committed under them); Iceberg:
the snapshot summary records ``binlog-cdc.app-id`` and ``binlog-cdc.batch-id``, and a batch whose
id is <= the table's recorded one is skipped. Schema changes are applied idempotently (a column
already added or renamed is left as it is); the table property ``binlog-cdc.shape`` keeps the
source's columns after the last DDL applied (and the ones before it, for a replay).
"""

from __future__ import annotations

import json
import logging
import threading
from decimal import Decimal

from cdc.errors import ConfigurationError, SchemaError
from cdc.replica.config import ReplicaConfig

from streaming.contract.envelope import SCHEMA_CHANGE, UPSERT_FIELDS
from streaming.sinks.foreach_batch import spark_safe
from streaming.sinks.plan import (OP_COLUMN, RESNAPSHOT, TableEvents, merge_clauses, plan_table,
                                  refuse_keyless)
from streaming.sinks.tables import default_table_path, server_columns
from streaming.sinks.spark.values import final_columns, fill_value, same_type, spark_ddl_type

log = logging.getLogger("binlog_cdc.spark_merge")

FORMATS = ("delta", "iceberg")
SHAPE_PROPERTY = "binlog-cdc.shape"
APP_KEY, BATCH_KEY = "binlog-cdc.app-id", "binlog-cdc.batch-id"
_SEQ, _RANK = "__cdc_seq", "__cdc_rank"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SparkMerge:
    """A ``foreachBatch`` function: ``merge(batch_df, batch_id)`` upserts the changes of a batch
    of the ``binlog-cdc`` source into one table per source table with Spark's MERGE (see the
    module). *format*: ``"delta"`` (*target*: a root path or URI) or ``"iceberg"`` (*target*: a
    catalog, or ``catalog.namespace``, of the session). Table definitions of tables the stream
    has no DDL record for come from the source server: ``config`` (a
    :class:`~cdc.replica.config.ReplicaConfig`) or ``host``/``port``/``user``/``password``/
    ``ssl``, or ``columns``: a ``(db, table) -> TableInfo`` function. ``table``: ``(db, table)
    -> target`` (a path for Delta, a table name for Iceberg) to place tables elsewhere."""

    def __init__(self, target: str, format: str = "delta", *, app_id: str,
                 host: str | None = None, port: int = 3306, user: str | None = None,
                 password: str | None = None, ssl=None, config: ReplicaConfig | None = None,
                 columns=None, table=None):
        if format not in FORMATS:
            raise ConfigurationError(f"SparkMerge: format {format!r}: use one of {FORMATS}")
        if not app_id:
            raise ConfigurationError("SparkMerge: app_id is required (it names the stream in the "
                                     "tables' commits; one per checkpoint)")
        if columns is None:
            columns = server_columns("SparkMerge", host, port, user, password, ssl, config)
        self.target = str(target)
        self.format = format
        self.app_id = str(app_id)
        self.columns = columns
        self.table = table
        self._server: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def __getstate__(self):  # picklable (Spark Connect runs foreachBatch in a server process)
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        close = getattr(self.columns, "close", None)
        if close:
            close()

    # --- entry point -----------------------------------------------------------------------------

    @spark_safe
    def __call__(self, df, batch_id: int) -> None:
        with self._lock:
            self._batch(df, int(batch_id))

    def name_of(self, db: str, table: str) -> str:
        """The SQL name of the target of ``db.table`` (``delta.`<path>``` for Delta)."""
        if self.format == "delta":
            path = self.table(db, table) if self.table else \
                default_table_path(self.target, db, table)
            return f"delta.{_q(path)}"
        if self.table:
            return self.table(db, table)
        return f"{self.target}.{_q(db)}.{_q(table)}"

    def _batch(self, df, batch_id: int) -> None:
        missing = [c for c in UPSERT_FIELDS if c not in df.columns]
        if missing:
            raise ConfigurationError(f"SparkMerge: the DataFrame lacks the columns {missing}; "
                                     f"pass the binlog-cdc source's DataFrame unchanged (with "
                                     f"option fields, at least {','.join(UPSERT_FIELDS)})")
        from pyspark.sql.types import StringType
        if not isinstance(df.schema["after"].dataType, StringType):
            raise ConfigurationError("SparkMerge reads JSON row images: leave out the source's "
                                     "option table (typed mode), or use DeltaUpserter")
        df = df.persist()
        try:
            for events in self._events(df):
                self._table(df, events, batch_id)
        finally:
            df.unpersist()

    def _events(self, df) -> list[TableEvents]:
        """One aggregate row per table: its TRUNCATE and schema-change records (all that comes
        to the driver)."""
        from pyspark.sql import functions as F
        record = F.col(SCHEMA_CHANGE) if SCHEMA_CHANGE in df.columns else \
            F.lit(None).cast("string")
        ev = F.when(F.col("op").isin("s", "t"),
                    F.struct(F.col("seq"), F.col("op"), record.alias("record")))
        rows = (df.groupBy("db", "table").agg(F.collect_list(ev).alias("events"))
                .orderBy("db", "table").collect())
        out = []
        for r in rows:
            evs = sorted(((e["seq"], e["op"], json.loads(e["record"]) if e["record"] else None)
                          for e in r["events"]), key=lambda e: e[0])
            out.append(TableEvents(r["db"], r["table"], evs))
        return out

    # --- one table -------------------------------------------------------------------------------

    def _table(self, df, events: TableEvents, batch_id: int) -> None:
        from pyspark.sql import functions as F
        spark = df.sparkSession
        db, name = events.db, events.table
        target = _Target.of(self, spark, db, name)
        if target.applied(batch_id):
            log.info("%s.%s: batch %d already applied, skipped", db, name, batch_id)
            return
        before = target.shape_before(batch_id)
        plan = plan_table(events, before,
                          lambda: self._server_shape(db, name))
        if plan.final is None:              # dropped (or no shape known): rows gone
            if target.exists:
                target.delete_all(batch_id)
            return
        refuse_keyless("SparkMerge", db, name, plan.final.primary_key)
        target.evolve(plan, before, batch_id)
        rows = df.where((F.col("db") == db) & (F.col("table") == name)
                        & F.col("op").isin("c", "u", "d", "r"))
        if plan.cut is not None:
            rows = rows.where(F.col("seq") > F.lit(plan.cut))
        source = _last_changes(rows, plan)
        target.merge(source, plan, batch_id)

    def _server_shape(self, db: str, name: str):
        key = (db, name)
        if key not in self._server:
            info = self.columns(db, name)
            self._server[key] = (info.columns, list(info.primary_key))
        return self._server[key]


def _last_changes(rows, plan):
    """The last change per key of *rows* (one table's row changes, after its last truncate),
    in the final shape of *plan*, with the change kind in :data:`OP_COLUMN`: the candidates
    of :mod:`streaming.sinks.plan` (a key change adds a delete of the old key at rank 0), the
    one with the highest ``(seq, rank)`` per key winning."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    cols = final_columns(plan)               # [(name, after value, before value)]
    names = [c for c, _a, _b in cols]
    pk = plan.final.primary_key
    after = {c: a for c, a, _b in cols}
    before = {c: b for c, _a, b in cols}
    is_d = F.col("op") == "d"
    moved = None
    for k in pk:
        diff = ~before[k].eqNullSafe(after[k])
        moved = diff if moved is None else moved | diff
    moved = (F.col("op") == "u") & F.col("before").isNotNull() & moved
    main = F.struct(*[F.when(is_d, before[c]).otherwise(after[c]).alias(c) for c in names],
                    F.col("op").alias(OP_COLUMN), F.col("seq").alias(_SEQ),
                    F.lit(plan.RANK_CHANGE).alias(_RANK))
    gone = F.when(moved, F.struct(*[before[c].alias(c) for c in names],
                                  F.lit("d").alias(OP_COLUMN), F.col("seq").alias(_SEQ),
                                  F.lit(plan.RANK_MOVED_AWAY).alias(_RANK)))
    cands = (rows.select(F.explode(F.array(main, gone)).alias("c"))
             .where(F.col("c").isNotNull()).select("c.*"))
    w = Window.partitionBy(*[F.col(k) for k in pk]).orderBy(F.col(_SEQ).desc(),
                                                            F.col(_RANK).desc())
    return (cands.withColumn("__n", F.row_number().over(w)).where(F.col("__n") == 1)
            .drop("__n", _SEQ, _RANK))


# --- targets --------------------------------------------------------------------------------------


class _Target:
    """One target table of a batch: what it holds, and the format's writes."""

    @staticmethod
    def of(up: SparkMerge, spark, db: str, name: str) -> "_Target":
        cls = _DeltaTarget if up.format == "delta" else _IcebergTarget
        return cls(up, spark, db, name)

    def __init__(self, up: SparkMerge, spark, db: str, name: str):
        self.up, self.spark, self.db, self.name = up, spark, db, name
        self.ident = up.name_of(db, name)
        self.exists = self._exists()
        self.props = self._properties() if self.exists else {}

    def sql(self, text: str):
        log.debug("%s", text)
        return self.spark.sql(text)

    def _properties(self) -> dict:
        return {r["key"]: r["value"] for r in self.sql(f"SHOW TBLPROPERTIES {self.ident}")
                .collect()}

    def columns(self) -> list[str]:
        return self.schema().names

    def shape_before(self, batch_id: int):
        """The source's shape the rows of this batch start from, as the last DDL applied left
        it (``(columns specs, primary key)``), or None (no DDL applied yet)."""
        text = self.props.get(SHAPE_PROPERTY)
        if not text:
            return None
        shape = json.loads(text)
        if shape.get("batch") == batch_id:      # a replay of the batch that wrote it
            return shape.get("before")
        return shape["columns"], shape["primary_key"]

    def evolve(self, plan, before, batch_id: int) -> None:
        """Create the table, or apply the batch's schema changes to it (idempotent: compares
        with the columns it has)."""
        final = plan.final
        if not self.exists:
            self._create(", ".join(f"{_q(c.name)} {spark_ddl_type(c)}" for c in final.columns))
            self.exists = True
        else:
            for old, new in plan.renames(self.columns()):
                self.sql(f"ALTER TABLE {self.ident} RENAME COLUMN {_q(old)} TO {_q(new)}")
            have = self.columns()
            gone = [n for n in have if n not in final.names]
            if gone and not plan.has_ddl:
                raise SchemaError(
                    f"SparkMerge: {self.db}.{self.name}: columns {gone} of {self.ident} are no "
                    f"longer in the source; stream with includeSchemaChanges, or {RESNAPSHOT}")
            for n in gone:
                self.sql(f"ALTER TABLE {self.ident} DROP COLUMN {_q(n)}")
            added = [c for c in final.columns if c.name not in have]
            if added:
                log.info("%s: adding columns %s", self.ident, [c.name for c in added])
                self.sql(f"ALTER TABLE {self.ident} ADD COLUMNS (" + ", ".join(
                    f"{_q(c.name)} {spark_ddl_type(c)}" for c in added) + ")")
            plan.check_types({f.name: f.dataType.simpleString() for f in self.schema().fields},
                             self.ident, same_type)
            if plan.has_ddl and self.props.get(SHAPE_PROPERTY) != self._shape_text(plan, before,
                                                                                  batch_id):
                self._backfill(plan, [c.name for c in added])
        text = self._shape_text(plan, before, batch_id)
        if text is not None and self.props.get(SHAPE_PROPERTY) != text:
            self.sql(f"ALTER TABLE {self.ident} SET TBLPROPERTIES ('{SHAPE_PROPERTY}' = "
                     f"{_sql_string(text)})")
            self.props[SHAPE_PROPERTY] = text

    @staticmethod
    def _shape_text(plan, before, batch_id: int) -> str | None:
        final = plan.final
        if final.specs is None or not plan.has_ddl:
            return None
        return json.dumps({"columns": final.specs, "primary_key": final.primary_key,
                           "batch": batch_id, "before": before})

    def _backfill(self, plan, added_now: list[str]) -> None:
        """Give the rows the target held before the batch what the batch's DDL gave them in
        the source: the added columns' DEFAULT (MySQL's implicit one for NOT NULL). Runs before
        the batch's MERGE and until its shape is recorded, so a replay repeats it on the same
        rows."""
        sets = {}
        for c in plan.final.columns:
            origin = plan.origins(0)[c.name]
            if origin.name is not None and not (origin.present and c.name in added_now):
                continue
            if origin.unknown:
                if self.spark.table(self.ident).limit(1).count():
                    raise SchemaError(f"SparkMerge: {self.db}.{self.name}: {origin.unknown}; "
                                      f"nothing was merged; {RESNAPSHOT}")
                continue
            if origin.fill is not None:
                sets[c.name] = fill_value(c, origin.fill)
        if sets:
            types = {c.name: spark_ddl_type(c) for c in plan.final.columns}
            log.info("%s: existing rows get %s", self.ident, sets)
            self.sql(f"UPDATE {self.ident} SET " + ", ".join(
                f"{_q(n)} = CAST({_sql_literal(v)} AS {types[n]})" for n, v in sets.items()))

    def merge(self, source, plan, batch_id: int) -> None:
        raise NotImplementedError


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_literal(v) -> str:
    """A SQL literal of a Python value of a column's Spark type (a DDL's DEFAULT)."""
    import datetime as dt
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, Decimal)):
        return str(v)
    if isinstance(v, float):
        return repr(v) + "D"
    if isinstance(v, (bytes, bytearray)):
        return "X'" + bytes(v).hex() + "'"
    if isinstance(v, dt.datetime):
        kind = "TIMESTAMP" if v.tzinfo is not None else "TIMESTAMP_NTZ"
        return f"{kind} '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, list):
        return "array(" + ", ".join(_sql_literal(x) for x in v) + ")"
    return _sql_string(str(v))


class _DeltaTarget(_Target):
    format = "delta"

    def __init__(self, up, spark, db, name):
        self.path = (up.table(db, name) if up.table else
                     default_table_path(up.target, db, name))
        super().__init__(up, spark, db, name)

    def _exists(self) -> bool:
        from delta.tables import DeltaTable
        return DeltaTable.isDeltaTable(self.spark, self.path)

    def schema(self):
        return self.spark.read.format("delta").load(self.path).schema

    def applied(self, batch_id: int) -> bool:
        return False            # delta-spark skips a committed (txnAppId, txnVersion) itself

    def _create(self, columns_sql: str) -> None:
        self.sql(f"CREATE TABLE IF NOT EXISTS {self.ident} ({columns_sql}) USING delta "
                 "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                 "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")

    def _txn(self, batch_id: int):
        conf = self.spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self.up.app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        conf.set("spark.databricks.delta.commitInfo.userMetadata",
                 json.dumps({APP_KEY: self.up.app_id, BATCH_KEY: batch_id}))

    def _untxn(self) -> None:
        for k in ("spark.databricks.delta.write.txnAppId",
                  "spark.databricks.delta.write.txnVersion",
                  "spark.databricks.delta.commitInfo.userMetadata"):
            self.spark.conf.unset(k)

    def delete_all(self, batch_id: int) -> None:
        from delta.tables import DeltaTable
        self._txn(batch_id)
        try:
            DeltaTable.forPath(self.spark, self.path).delete()
        finally:
            self._untxn()

    def merge(self, source, plan, batch_id: int) -> None:
        from delta.tables import DeltaTable
        m = DeltaTable.forPath(self.spark, self.path).alias("t").merge(
            source.alias("s"), plan.on("t", "s"))
        for kind, cond in merge_clauses(plan.cut is not None):
            if kind == "delete":
                m = m.whenMatchedDelete(cond)
            elif kind == "update":
                m = m.whenMatchedUpdate(cond, {_q(c): f"s.{_q(c)}" for c in plan.final.names})
            elif kind == "insert":
                m = m.whenNotMatchedInsert(cond, {_q(c): f"s.{_q(c)}" for c in plan.final.names})
            else:                               # delete what the changes do not write
                m = m.whenNotMatchedBySourceDelete()
        self._txn(batch_id)
        try:
            m.execute()
        finally:
            self._untxn()


class _IcebergTarget(_Target):
    format = "iceberg"

    def schema(self):
        return self.spark.table(self.ident).schema

    def _exists(self) -> bool:
        return self.spark.catalog.tableExists(self.ident.replace("`", ""))

    def applied(self, batch_id: int) -> bool:
        if not self.exists:
            return False
        row = self.sql(f"SELECT max(CAST(summary['{BATCH_KEY}'] AS BIGINT)) AS b FROM "
                       f"{self.ident}.snapshots WHERE summary['{APP_KEY}'] = "
                       f"{_sql_string(self.up.app_id)}").collect()[0]
        return row["b"] is not None and row["b"] >= batch_id

    def _create(self, columns_sql: str) -> None:
        ns = self.ident.rsplit(".", 1)[0]
        self.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        self.sql(f"CREATE TABLE IF NOT EXISTS {self.ident} ({columns_sql}) USING iceberg "
                 "TBLPROPERTIES ('format-version' = '2')")

    def _summary(self, batch_id: int):
        prefix = "spark.sql.iceberg.snapshot-property."
        self.spark.conf.set(prefix + APP_KEY, self.up.app_id)
        self.spark.conf.set(prefix + BATCH_KEY, str(batch_id))

    def _unsummary(self) -> None:
        prefix = "spark.sql.iceberg.snapshot-property."
        self.spark.conf.unset(prefix + APP_KEY)
        self.spark.conf.unset(prefix + BATCH_KEY)

    def delete_all(self, batch_id: int) -> None:
        self._summary(batch_id)
        try:
            self.sql(f"DELETE FROM {self.ident}")
        finally:
            self._unsummary()

    def merge(self, source, plan, batch_id: int) -> None:
        view = f"binlog_cdc_merge_{abs(hash((self.db, self.name, batch_id)))}"
        source.createOrReplaceTempView(view)
        sets = ", ".join(f"t.{_q(c)} = s.{_q(c)}" for c in plan.final.names)
        cols = ", ".join(_q(c) for c in plan.final.names)
        vals = ", ".join(f"s.{_q(c)}" for c in plan.final.names)
        whens = []
        for kind, cond in merge_clauses(plan.cut is not None):
            if kind == "delete":
                whens.append(f"WHEN MATCHED AND {cond} THEN DELETE")
            elif kind == "update":
                whens.append(f"WHEN MATCHED AND {cond} THEN UPDATE SET {sets}")
            elif kind == "insert":
                whens.append(f"WHEN NOT MATCHED AND {cond} THEN INSERT ({cols}) VALUES ({vals})")
            else:
                whens.append("WHEN NOT MATCHED BY SOURCE THEN DELETE")
        self._summary(batch_id)
        try:
            self.sql(f"MERGE INTO {self.ident} t USING {view} s ON {plan.on('t', 's')} "
                     + " ".join(whens))
        finally:
            self._unsummary()
            self.spark.catalog.dropTempView(view)


__all__ = ["SparkMerge", "FORMATS", "SHAPE_PROPERTY"]
