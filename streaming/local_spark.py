"""A local SparkSession set up the way binlog-cdc's demo, tests and benchmarks use it."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlparse

# Spark's checkpoint writer that renames a temporary file with the FileSystem API. The default
# (FileContext) one costs ~40 ms per log file on a local disk, and every micro-batch writes two
# (the offset log and the commit log): with this one both take ~10-20 ms. The rename is atomic
# on local disks and HDFS, which is what a checkpoint needs; on object stores keep Spark's
# default (see README "Low latency for dashboards").
FILE_SYSTEM_CHECKPOINTS = ("spark.sql.streaming.checkpointFileManagerClass",
                           "org.apache.spark.sql.execution.streaming.checkpointing."
                           "FileSystemBasedCheckpointFileManager")


def renames_atomically(location: str) -> bool:
    """True for a checkpoint *location* on a local disk or HDFS (a plain path, ``file:``,
    ``hdfs:``), where :data:`FILE_SYSTEM_CHECKPOINTS` is safe."""
    return urlparse(location).scheme in ("", "file", "hdfs")


def local_spark(app_name: str = "binlog-cdc", cores: int = 2):
    """``local[cores]``, no UI or console progress bars, UTC session time zone, 2 shuffle
    partitions, Python workers on this interpreter, log level ERROR, the checkpoint writer of
    :data:`FILE_SYSTEM_CHECKPOINTS` (its checkpoints are local)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config(*FILE_SYSTEM_CHECKPOINTS).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
