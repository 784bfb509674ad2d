"""A streaming query into :class:`streaming.spark_merge.SparkMerge` in its own process, for the
kill -9 / restart tests (tests/live/test_spark_merge_kills.py).

    python tests/support/merge_job.py '<json config>'

Config: ``format`` (delta / iceberg), ``target``, ``warehouse`` (Iceberg), ``app_id``,
``server`` (host, port, user, password), ``checkpoint``; the input: ``options`` (the binlog-cdc
source's) or ``recorded`` (a directory of micro-batches :func:`record` wrote, replayed one file
per batch through Spark's JSON file source); ``hang_after``/``marker_dir``: after that batch
reached the target, mark it and hang (the test kills the job between the target's commit and
Spark's); ``dump``: at the end, write every target table of ``tables`` (``[[db, table]]``) as
JSON ``{"db.table": {"columns": [...], "rows": [[...]]}}``. Every batch runs under
:func:`tests.support.no_collect.no_image_collect`: the sink collecting rows fails the job.
Prints ``batch N`` per batch, ``done`` at the end.

``{"record": dir, "options": ...}`` instead runs the binlog-cdc source alone (availableNow) and
writes each micro-batch as one JSON file ``dir/NNNNN.json`` (the envelope as it is), for a
Spark without the source's streaming API.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

ENVELOPE = ("op", "db", "table", "before", "after", "seq", "schema_change")


def _reader(spark, options):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def record(cfg) -> None:
    from streaming.local_spark import local_spark
    spark = local_spark("merge-job-record")
    out = cfg["record"]
    os.makedirs(out, exist_ok=True)

    def keep(df, batch_id):
        rows = [r.asDict() for r in df.select(*ENVELOPE).orderBy("seq").collect()]
        tmp = os.path.join(out, f".{batch_id:05d}.tmp")
        with open(tmp, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, os.path.join(out, f"{batch_id:05d}.json"))

    q = (_reader(spark, cfg["options"]).writeStream.foreachBatch(keep)
         .option("checkpointLocation", cfg["checkpoint"]).trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        print("FAILED", q.exception(), flush=True)
        sys.exit(3)
    print("done", flush=True)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if "record" in cfg:
        return record(cfg)
    from pyspark.sql.types import StringType, StructField, StructType

    from streaming.local_spark import local_spark
    from streaming.spark_merge import SparkMerge
    from tests.support.no_collect import no_image_collect

    spark = local_spark("merge-kill-test", formats=[cfg["format"]], warehouse=cfg.get("warehouse"))
    sink = SparkMerge(cfg["target"], format=cfg["format"], app_id=cfg["app_id"], **cfg["server"])

    def fb(df, batch_id):
        with no_image_collect():
            sink(df, batch_id)
        print("batch", batch_id, flush=True)
        hang = cfg.get("hang_after")
        if hang is not None and batch_id >= hang:
            open(os.path.join(cfg["marker_dir"], str(batch_id)), "w").close()
            time.sleep(600)

    if "recorded" in cfg:
        schema = StructType([StructField(c, StringType()) for c in ENVELOPE])
        changes = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                   .json(cfg["recorded"]))
    else:
        changes = _reader(spark, cfg["options"])
    q = (changes.writeStream.foreachBatch(fb).option("checkpointLocation", cfg["checkpoint"])
         .trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        print("FAILED", q.exception(), flush=True)
        sys.exit(3)
    if cfg.get("dump"):
        out = {}
        for db, table in cfg["tables"]:
            t = spark.table(sink.name_of(db, table))
            out[f"{db}.{table}"] = {"columns": t.columns,
                                   "rows": [[None if v is None else str(v) for v in r]
                                            for r in t.collect()]}
        with open(cfg["dump"], "w") as f:
            json.dump(out, f)
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
