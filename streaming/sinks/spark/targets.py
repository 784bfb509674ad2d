"""The target tables of :class:`streaming.sinks.spark.merge.SparkMerge`: what one holds (its
columns, the shape the last DDL left, the batches applied) and the format's writes -- Delta
path tables through delta-spark, Iceberg tables of a catalog.

Schema evolution in place (:meth:`Target.evolve`): columns renamed, dropped, added, and a
column's type widened where the format can (:func:`streaming.sinks.spark.values.widens`: Delta's
type widening, ``delta.enableTypeWidening``, switched on the first time a column needs it;
Iceberg's promotions); any other type change is refused before anything is written.

A table renamed in the source (:meth:`Target.move_from`): Delta path tables have no name to
change, so the new path's table is replaced by the old one's content in one commit (``CREATE
OR REPLACE TABLE ... AS SELECT``, on the executors) and the old path keeps its table with its
rows deleted -- what ``DeltaUpserter`` does; Iceberg: ``ALTER TABLE ... RENAME TO`` in the
catalog (which must support renames: a Hadoop catalog does not). The table property
:data:`MOVED_PROPERTY` records the batch and position of the last move, so that a replayed
batch does not move again.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal

from cdc.errors import SchemaError

from streaming.sinks.plan import RESNAPSHOT, merge_clauses
from streaming.sinks.tables import default_table_path
from streaming.sinks.spark.values import (WIDENINGS, fill_value, same_type, spark_ddl_type,
                                          widens)

log = logging.getLogger("binlog_cdc.spark_merge")

SHAPE_PROPERTY = "binlog-cdc.shape"
MOVED_PROPERTY = "binlog-cdc.moved"
APP_KEY, BATCH_KEY = "binlog-cdc.app-id", "binlog-cdc.batch-id"
_WIDENING = "delta.enableTypeWidening"
#: a new Delta table's: column mapping, so that columns can be renamed and dropped
_DELTA_PROPERTIES = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2",
                     "delta.minWriterVersion": "5"}


def q(name: str) -> str:
    """*name* as a quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


# --- targets --------------------------------------------------------------------------------------


class Target:
    """One target table of a batch: what it holds, and the format's writes."""

    format = ""

    @staticmethod
    def of(up, spark, db: str, name: str) -> "Target":
        cls = _DeltaTarget if up.format == "delta" else _IcebergTarget
        return cls(up, spark, db, name)

    def __init__(self, up, spark, db: str, name: str):
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
            self._create(", ".join(f"{q(c.name)} {spark_ddl_type(c)}" for c in final.columns))
            self.exists = True
        else:
            widen = self._widenings(plan)           # refused before anything is written
            renames = plan.renames(self.columns())
            have = self.columns()
            for old, new in renames:
                have[have.index(old)] = new
            gone = [n for n in have if n not in final.names]
            if gone and not plan.has_ddl:
                raise SchemaError(
                    f"SparkMerge: {self.db}.{self.name}: columns {gone} of {self.ident} are no "
                    f"longer in the source; stream with includeSchemaChanges, or {RESNAPSHOT}")
            for old, new in renames:
                self.sql(f"ALTER TABLE {self.ident} RENAME COLUMN {q(old)} TO {q(new)}")
            added = [c for c in final.columns if c.name not in have]
            if added:                   # before the drops (Delta keeps at least one column)
                log.info("%s: adding columns %s", self.ident, [c.name for c in added])
                self.sql(f"ALTER TABLE {self.ident} ADD COLUMNS (" + ", ".join(
                    f"{q(c.name)} {spark_ddl_type(c)}" for c in added) + ")")
            for n in gone:
                self.sql(f"ALTER TABLE {self.ident} DROP COLUMN {q(n)}")
            for n, t in widen.items():
                self._widen(n, t)
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

    def _widenings(self, plan) -> dict[str, str]:
        """``{column: new type}`` of the target's columns whose type the final shape widens in
        a way the format can do in place; SchemaError (nothing written) when a column changes
        type in a way it cannot."""
        types = {f.name: f.dataType.simpleString() for f in self.schema().fields}
        for old, new in plan.renames(list(types)):
            types[new] = types.pop(old)
        widen = {c.name: spark_ddl_type(c) for c in plan.final.columns
                 if c.name in types and not same_type(c, types[c.name])
                 and widens(self.format, types[c.name], spark_ddl_type(c))}
        plan.check_types({**types, **widen}, self.ident, same_type,
                         hint=f"{self.format} changes a column's type in place only to a wider "
                              f"one ({WIDENINGS[self.format]})")
        return widen

    def _widen(self, name: str, to: str) -> None:
        log.info("%s: column %s widened to %s", self.ident, name, to)
        self.sql(f"ALTER TABLE {self.ident} ALTER COLUMN {q(name)} TYPE {to}")

    def moved_tag(self, batch_id: int) -> str | None:
        """The seq of the last move of this batch that left this table, or None."""
        text = self.props.get(MOVED_PROPERTY)
        if not text:
            return None
        tag = json.loads(text)
        if tag.get("app") == self.up.app_id and tag.get("batch") == batch_id:
            return tag["seq"]
        return None

    def _tag_text(self, batch_id: int, seq: str) -> str:
        return json.dumps({"app": self.up.app_id, "batch": batch_id, "seq": seq})

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
                f"{q(n)} = CAST({_sql_literal(v)} AS {types[n]})" for n, v in sets.items()))

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


class _DeltaTarget(Target):
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
                 "TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in
                                               _DELTA_PROPERTIES.items()) + ")")

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

    def _widen(self, name: str, to: str) -> None:
        if self.props.get(_WIDENING) != "true":
            self.sql(f"ALTER TABLE {self.ident} SET TBLPROPERTIES ('{_WIDENING}' = 'true')")
            self.props[_WIDENING] = "true"
        super()._widen(name, to)

    def move_from(self, old: "Target", batch_id: int, seq: str) -> None:
        """This path's table becomes *old*'s (its rows, columns and properties), in one commit
        on the executors; *old* keeps its rows until its delete."""
        if not old.exists:
            log.info("%s: renamed from %s, which has no table: nothing to move", self.ident,
                     old.ident)
            return
        props = dict(_DELTA_PROPERTIES)
        props.update({k: v for k, v in old.props.items()
                      if k.startswith("binlog-cdc.") or k == _WIDENING})
        props[MOVED_PROPERTY] = self._tag_text(batch_id, seq)
        cols = ", ".join(q(c) for c in old.columns())
        log.info("%s: the table of %s moved here", self.ident, old.ident)
        self.sql(f"CREATE OR REPLACE TABLE {self.ident} USING delta TBLPROPERTIES ("
                 + ", ".join(f"{_sql_string(k)} = {_sql_string(v)}" for k, v in props.items())
                 + f") AS SELECT {cols} FROM {old.ident}")
        self.exists, self.props = True, self._properties()

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
                m = m.whenMatchedUpdate(cond, {q(c): f"s.{q(c)}" for c in plan.final.names})
            elif kind == "insert":
                m = m.whenNotMatchedInsert(cond, {q(c): f"s.{q(c)}" for c in plan.final.names})
            else:                               # delete what the changes do not write
                m = m.whenNotMatchedBySourceDelete()
        self._txn(batch_id)
        try:
            m.execute()
        finally:
            self._untxn()


class _IcebergTarget(Target):
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

    def move_from(self, old: "Target", batch_id: int, seq: str) -> None:
        """``ALTER TABLE old RENAME TO`` this name (a table already here is dropped first: a
        table dropped in the source keeps its target, emptied)."""
        tag = self._tag_text(batch_id, seq)
        if old.exists:
            if self.exists:
                self.sql(f"DROP TABLE {self.ident}")
            new = self.ident.split(".", 1)[1]           # the name within the catalog
            log.info("%s renamed to %s", old.ident, self.ident)
            try:
                self.sql(f"ALTER TABLE {old.ident} RENAME TO {new}")
            except Exception as e:                      # the catalog's refusal (e.g. Hadoop's)
                if "rename" not in str(e).lower():
                    raise
                raise SchemaError(
                    f"SparkMerge: {self.db}.{self.name} is renamed from {old.db}.{old.name} "
                    f"in the source, and the Iceberg catalog cannot rename {old.ident} "
                    f"({str(e).splitlines()[0][:200]}); use a catalog that renames tables "
                    f"(REST, Hive, JDBC, Glue, Nessie), or {RESNAPSHOT}") from None
            old.exists, self.exists = False, True
        elif not self.exists:
            return
        self.sql(f"ALTER TABLE {self.ident} SET TBLPROPERTIES ('{MOVED_PROPERTY}' = "
                 f"{_sql_string(tag)})")
        self.props = self._properties()

    def delete_all(self, batch_id: int) -> None:
        self._summary(batch_id)
        try:
            self.sql(f"DELETE FROM {self.ident}")
        finally:
            self._unsummary()

    def merge(self, source, plan, batch_id: int) -> None:
        view = f"binlog_cdc_merge_{abs(hash((self.db, self.name, batch_id)))}"
        source.createOrReplaceTempView(view)
        sets = ", ".join(f"t.{q(c)} = s.{q(c)}" for c in plan.final.names)
        cols = ", ".join(q(c) for c in plan.final.names)
        vals = ", ".join(f"s.{q(c)}" for c in plan.final.names)
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


__all__ = ["Target", "SHAPE_PROPERTY", "MOVED_PROPERTY", "APP_KEY", "BATCH_KEY", "q"]
