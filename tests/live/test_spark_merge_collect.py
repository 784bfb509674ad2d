"""The guard the Spark sink's tests run every batch under
(:func:`tests.support.no_collect.no_image_collect`) fails a sink that brings row images to the
driver -- DeltaUpserter, which collects each batch with ``toArrow()`` by design, and any collect of
a DataFrame built from the images -- and lets through what SparkMerge collects: one aggregate row
per table of names and TRUNCATE / schema-change records."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from tests.support.no_collect import ImagesCollected, no_image_collect, reads_images  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.compat("no row images collected by SparkMerge")]

COLUMNS = [{"name": "id", "type": "int", "nullable": False, "charset": None, "default": None,
            "default_expr": False},
           {"name": "v", "type": "varchar(10)", "nullable": True, "charset": "utf8mb4",
            "default": None, "default_expr": False}]


@pytest.fixture(scope="module")
def batch(spark):
    from pyspark.sql.types import StringType, StructField, StructType
    schema = StructType([StructField(n, StringType()) for n in
                         ("op", "db", "table", "before", "after", "seq", "schema_change")])
    create = {"type": "CREATE", "ddl": "CREATE TABLE t", "renamed_from": None,
              "renamed_columns": {}, "columns": COLUMNS, "primary_key": ["id"], "unsure": False}
    rows = [("s", "d", "t", None, None, "0001", json.dumps(create))]
    rows += [("c", "d", "t", None, json.dumps({"id": i, "v": f"v{i}"}), f"{i + 2:04d}", None)
             for i in range(50)]
    rows += [("t", "d", "u", None, None, "0100", None),
             ("d", "d", "u", json.dumps({"id": 1}), None, "0101", None)]
    return spark.createDataFrame(rows, schema)


def test_the_guard_fails_a_sink_that_collects_the_batch(batch, tmp_path):
    from streaming.sinks.delta.upserter import DeltaUpserter
    from streaming.sinks.plan import record_columns
    from streaming.sinks.tables import TableInfo
    up = DeltaUpserter(tmp_path / "delta", app_id="guard",
                       columns=lambda db, t: TableInfo(record_columns({"columns": COLUMNS,
                                                                       "primary_key": ["id"]}),
                                                       ["id"]))
    with no_image_collect():
        with pytest.raises(Exception) as e:
            up(batch, 0)
    assert "toArrow of row images on the driver" in str(e.value)
    assert not (tmp_path / "delta" / "d" / "t").exists()
    with no_image_collect():
        for collect in (lambda: batch.collect(), lambda: batch.select("after").take(1),
                        lambda: batch.where(batch.after.contains("v3")).select("seq").collect(),
                        lambda: batch.selectExpr("length(before) AS n").toPandas(),
                        lambda: batch.groupBy("db").agg({"after": "max"}).collect()):
            with pytest.raises(ImagesCollected):
                collect()
    assert batch.select("after").take(1)            # outside the guard: as usual


def test_the_guard_lets_through_what_spark_merge_collects(batch):
    from streaming.sinks.spark.merge import SparkMerge
    sink = SparkMerge("/nowhere", format="delta", app_id="guard",
                      columns=lambda db, t: pytest.fail("no table definition needed"))
    assert not reads_images(batch.groupBy("db", "table").count())
    with no_image_collect():
        events = sink._events(batch.persist())
        assert batch.groupBy("db", "table").count().collect()
    assert [(e.db, e.table, [(s, op) for s, op, _r in e.events]) for e in events] == [
        ("d", "t", [("0001", "s")]), ("d", "u", [("0100", "t")])]
    assert events[0].events[0][2]["columns"] == COLUMNS
