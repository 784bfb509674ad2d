"""A streaming query in its own process, for kill -9 / restart tests.

    python tests/support/spark_stream_job.py '<json config>'

Config keys: ``options`` (the binlog-cdc source options), ``checkpoint``, ``out`` (a parquet
directory: Spark's file sink commits each batch exactly once through ``_spark_metadata``),
``available_now`` (drain and exit) or else run until killed.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from streaming.apps.local_spark import local_spark  # noqa: E402


def main() -> None:
    cfg = json.loads(sys.argv[1])
    spark = local_spark("binlog-cdc-kill-test")
    reader = spark.readStream.format("binlog-cdc")
    for k, v in cfg["options"].items():
        reader = reader.option(k, v)
    writer = (reader.load().writeStream.format("parquet")
              .option("path", cfg["out"]).option("checkpointLocation", cfg["checkpoint"]))
    if cfg.get("available_now"):
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
