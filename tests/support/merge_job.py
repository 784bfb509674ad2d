"""A streaming query into :class:`streaming.sinks.spark.merge.SparkMerge` in its own process, for
the kill -9 / restart tests (tests/live/test_spark_merge_kills.py).

    python tests/support/merge_job.py '<json config>'

Config: ``format`` (delta / iceberg), ``target``, ``warehouse`` (Iceberg), ``app_id``,
``server`` (host, port, user, password), ``checkpoint``, ``options`` (the binlog-cdc source's);
``hang_after``/``marker_dir``: after that batch reached the target, mark it and hang (the test
kills the job between the target's commit and Spark's); ``written``: a file the test makes
once its rows are written (the query runs until then); ``dump``: once everything available
is processed, write every target table of ``tables`` (``[[db, table]]``) as JSON
``{"db.table": {"columns": [...], "rows": [[...]]}}``. Every batch runs under
:func:`tests.support.no_collect.no_image_collect`: the sink collecting rows fails the job.
Prints ``batch N`` per batch, ``done`` at the end.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _reader(spark, options):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    from streaming.apps.local_spark import local_spark
    from streaming.sinks.spark import SparkMerge
    from tests.support.no_collect import no_image_collect
    from tests.support.processes import run_until_written

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

    # processingTime and processAllAvailable, not availableNow: before PySpark 4.2 a Python
    # source cannot bound the batches of an availableNow query (it runs as one batch)
    run_until_written(_reader(spark, cfg["options"]).writeStream.foreachBatch(fb)
                      .option("checkpointLocation", cfg["checkpoint"]), cfg.get("written"))
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
