"""SparkMerge (:class:`streaming.sinks.spark.merge.SparkMerge`) and the DDL beyond columns added,
renamed and dropped, for Delta (delta-spark) and Iceberg (its Spark runtime): ``RENAME TABLE``,
column type changes (widened in place; what the format cannot do stops the stream with what to
do) and typed mode (option ``table``: row images as structs). Each stream runs against a real
server and ends equal to its ``SELECT *`` (columns, names and order, and rows).

The streams run in this process (one Spark session for the module), every batch under
:func:`tests.support.no_collect.no_image_collect`. Iceberg tables live in an Iceberg JDBC catalog
(on SQLite): it renames tables, which a Hadoop catalog cannot.
"""

from __future__ import annotations

import datetime as dt

import pytest

pytest.importorskip("pyspark")

from cdc.values.render import time_text  # noqa: E402
from tests.live.test_spark_merge_kills import needs_connector, run_sql  # noqa: E402
from tests.support.spark_support import fresh_database, select_all, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]

CATALOG = "cat"
SQLITE = "org.xerial:sqlite-jdbc:3.46.1.3"     # the JDBC catalog's database


def _formats() -> list[str]:
    out = []
    for fmt in ("delta", "iceberg"):
        try:
            needs_connector(fmt)
        except pytest.skip.Exception:
            continue
        out.append(fmt)
    return out


@pytest.fixture(scope="module")
def merge_spark(tmp_path_factory):
    """A session with the connectors this PySpark has (and the formats it writes)."""
    from streaming.apps.local_spark import local_spark
    formats = _formats()
    if not formats:
        needs_connector("delta")        # skips with the reason
    warehouse = str(tmp_path_factory.mktemp("warehouse"))
    iceberg = "iceberg" in formats
    spark = local_spark("spark-merge-ddl", formats=formats, warehouse=warehouse,
                        packages=[SQLITE] if iceberg else ())
    if iceberg:
        cat = f"spark.sql.catalog.{CATALOG}"
        spark.conf.set(cat, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"{cat}.type", "jdbc")
        spark.conf.set(f"{cat}.uri", f"jdbc:sqlite:{warehouse}/catalog.db")
        spark.conf.set(f"{cat}.jdbc.schema-version", "V1")     # (Spark asks about views too)
        spark.conf.set(f"{cat}.warehouse", warehouse + "/jdbc")
    yield spark, formats
    spark.stop()


def fmt_params(feature: str):
    return [pytest.param("delta", marks=pytest.mark.compat(f"SparkMerge into Delta: {feature}")),
            pytest.param("iceberg", marks=pytest.mark.compat(f"SparkMerge into Iceberg: "
                                                             f"{feature}"))]


class Stream:
    """The binlog-cdc stream of *db* from the position at creation into a SparkMerge of
    *fmt*, run to the end of what there is by :meth:`run` (one checkpoint: each run resumes)."""

    def __init__(self, merge_spark, server, tmp_path, fmt: str, db: str, target=None,
                 **options):
        from streaming.sinks.spark import SparkMerge
        self.spark, formats = merge_spark
        if fmt not in formats:
            needs_connector(fmt)
        self.server, self.db, self.chk = server, db, str(tmp_path / "chk")
        self.options = source_options(server, db, server.current_position(),
                                      maxEventsPerTrigger=6, **options)
        if "table" in options:
            del self.options["includeTables"]
        p = server.cdc_params()
        if target is None:
            target = str(tmp_path / "delta") if fmt == "delta" else CATALOG
        self.sink = SparkMerge(target,
                               format=fmt, app_id=f"ddl-{db}", host=p["host"], port=p["port"],
                               user=p["user"], password=p["password"])

    def run(self) -> None:
        from tests.support.no_collect import no_image_collect

        def batch(df, batch_id):
            with no_image_collect():
                self.sink(df, batch_id)
        reader = self.spark.readStream.format("binlog-cdc")
        for k, v in self.options.items():
            reader = reader.option(k, v)
        q = (reader.load().writeStream.foreachBatch(batch)
             .option("checkpointLocation", self.chk).trigger(processingTime="0 seconds").start())
        try:
            q.processAllAvailable()
        finally:
            q.stop()

    def refused(self, statements) -> str:
        """Run *statements* on the source, then the stream, which must fail: its message."""
        run_sql(self.server, self.db, statements)
        with pytest.raises(Exception) as e:
            self.run()
        return str(e.value)

    def target(self, table: str):
        return self.spark.table(self.sink.name_of(self.db, table))

    def assert_equal_to_select(self, *tables: str) -> None:
        for table in tables:
            names, rows = select_all(self.server, self.db, table, _text)
            t = self.target(table)
            got = sorted((tuple(_text(v) for v in r) for r in t.collect()), key=repr)
            assert t.columns == names, (table, t.columns, names)
            assert got == rows, (table, got, rows)


def _text(v):
    """A value as text (TIME as MySQL prints it, the target's text)."""
    if isinstance(v, dt.timedelta):
        return time_text(v)
    return None if v is None else str(v)


@pytest.mark.parametrize("fmt", fmt_params("RENAME TABLE"))
def test_spark_merge_ddl_rename_table_equals_select(merge_spark, server, tmp_path, fmt):
    """A table renamed (its target and the changes before the rename in the same batch go to
    the new name), changed under its new name, and a new table made under the old name."""
    db = fresh_database(server, f"smddl_ren_{fmt}")
    run_sql(server, db, ["CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20), n INT)"])
    s = Stream(merge_spark, server, tmp_path, fmt, db, includeSchemaChanges="true")
    run_sql(server, db, ["INSERT INTO a VALUES " + ", ".join(f"({i}, 'n{i}', {i})"
                                                             for i in range(1, 7))])
    s.run()
    run_sql(server, db, [
        "UPDATE a SET n = n + 100 WHERE id IN (1, 2)",
        "DELETE FROM a WHERE id = 3",
        "RENAME TABLE a TO a2",
        "INSERT INTO a2 VALUES (10, 'ten', 10)",
        "UPDATE a2 SET id = 20, name = 'moved' WHERE id = 4",
        "ALTER TABLE a2 ADD COLUMN z INT NOT NULL DEFAULT 3",
        "UPDATE a2 SET z = 9 WHERE id = 5",
        "CREATE TABLE a (k VARCHAR(5) PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES ('x', 1), ('y', 2)",
    ])
    s.run()
    run_sql(server, db, ["RENAME TABLE a2 TO a3", "DELETE FROM a3 WHERE id = 6"])
    s.run()
    s.assert_equal_to_select("a", "a3")
    if fmt == "delta":          # the paths renamed away keep their tables, emptied
        assert s.target("a2").count() == 0
    else:
        assert not s.spark.catalog.tableExists(f"{CATALOG}.{db}.a2")


@pytest.mark.compat("SparkMerge into Iceberg: RENAME TABLE refused by a Hadoop catalog")
def test_spark_merge_ddl_iceberg_hadoop_catalog_refuses_renames(merge_spark, server,
                                                                 tmp_path):
    from streaming.apps.local_spark import ICEBERG_CATALOG
    db = fresh_database(server, "smddl_hadoop")
    run_sql(server, db, ["CREATE TABLE a (id INT PRIMARY KEY, v INT)"])
    s = Stream(merge_spark, server, tmp_path, "iceberg", db, target=ICEBERG_CATALOG,
               includeSchemaChanges="true")
    run_sql(server, db, ["INSERT INTO a VALUES (1, 1), (2, 2)"])
    s.run()
    text = s.refused(["RENAME TABLE a TO b", "INSERT INTO b VALUES (3, 3)"])
    assert "SchemaError: SparkMerge: smddl_hadoop.b is renamed from smddl_hadoop.a in the " \
           "source, and the Iceberg catalog cannot rename" in text, text
    assert "use a catalog that renames tables" in text and "re-snapshot the table" in text, text
    assert sorted(tuple(r) for r in s.target("a").collect()) == [(1, 1), (2, 2)]


@pytest.mark.parametrize("fmt", fmt_params("column types widened"))
def test_spark_merge_ddl_type_widening_equals_select(merge_spark, server, tmp_path, fmt):
    db = fresh_database(server, f"smddl_wide_{fmt}")
    run_sql(server, db, ["CREATE TABLE w (id INT PRIMARY KEY, n INT, d DECIMAL(6,2), "
                         "f FLOAT, s VARCHAR(5))"])
    s = Stream(merge_spark, server, tmp_path, fmt, db, includeSchemaChanges="true")
    run_sql(server, db, ["INSERT INTO w VALUES (1, 1, 1.25, 1.5, 'a'), (2, -7, 9999.99, 0.25, "
                         "'bcdef'), (3, 3, 3.00, 3, 'c')"])
    s.run()
    run_sql(server, db, [
        "UPDATE w SET n = 11 WHERE id = 1",
        "ALTER TABLE w MODIFY n BIGINT, MODIFY d DECIMAL(12,2), MODIFY f DOUBLE, "
        "MODIFY s VARCHAR(40)",
        "INSERT INTO w VALUES (4, 9000000000, 1234567890.12, 0.1, 'a longer text than five')",
        "UPDATE w SET n = -9000000001, d = -99999999.5 WHERE id = 2",
        "DELETE FROM w WHERE id = 3",
    ])
    s.run()
    s.assert_equal_to_select("w")
    types = dict((f.name, f.dataType.simpleString()) for f in s.target("w").schema.fields)
    assert (types["n"], types["d"], types["f"]) == ("bigint", "decimal(12,2)", "double")


@pytest.mark.parametrize("fmt", fmt_params("a type change it cannot make refused"))
def test_spark_merge_ddl_type_change_refused_with_what_to_do(merge_spark, server, tmp_path, fmt):
    db = fresh_database(server, f"smddl_bad_{fmt}")
    run_sql(server, db, ["CREATE TABLE x (id INT PRIMARY KEY, n INT)"])
    s = Stream(merge_spark, server, tmp_path, fmt, db, includeSchemaChanges="true")
    run_sql(server, db, ["INSERT INTO x VALUES (1, 1), (2, 2)"])
    s.run()
    text = s.refused(["ALTER TABLE x MODIFY n VARCHAR(10)", "INSERT INTO x VALUES (3, 'c')"])
    assert "SchemaError" in text and "column n is int in" in text, text
    assert "cannot take the source's columns" in text and "nothing was written" in text, text
    assert "re-snapshot the table" in text, text
    t = s.target("x")           # as it was
    assert [f.dataType.simpleString() for f in t.schema.fields] == ["int", "int"]
    assert sorted(tuple(r) for r in t.collect()) == [(1, 1), (2, 2)]


@pytest.mark.parametrize("fmt", fmt_params("typed mode"))
def test_spark_merge_ddl_typed_mode_equals_select(merge_spark, server, tmp_path, fmt):
    db = fresh_database(server, f"smddl_typed_{fmt}")
    run_sql(server, db, ["CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), "
                         "amount DECIMAL(10,2), at DATETIME, tm TIME, b BIGINT UNSIGNED)"])
    s = Stream(merge_spark, server, tmp_path, fmt, db, table=f"{db}.t")
    run_sql(server, db, [
        "INSERT INTO t VALUES " + ", ".join(
            f"({i}, 'n{i}', {i}.25, '2024-01-{i:02d} 10:00:00', '1{i}:30:00', {i}) "
            for i in range(1, 9)),
        "UPDATE t SET amount = amount + 1, tm = '01:02:03' WHERE id % 3 = 0",
        "UPDATE t SET id = id + 100 WHERE id IN (2, 5)",
        "DELETE FROM t WHERE id = 4",
        "INSERT INTO t VALUES (4, NULL, NULL, NULL, NULL, 18446744073709551615)",
    ])
    s.run()
    run_sql(server, db, ["TRUNCATE TABLE t",
                         "INSERT INTO t VALUES (1, 'again', 0.50, '2024-03-01 12:30:00', "
                         "'23:59:59', 0), (2, 'two', 2.00, NULL, '00:00:01', 2)",
                         "UPDATE t SET name = 'changed' WHERE id = 2"])
    s.run()
    s.assert_equal_to_select("t")
