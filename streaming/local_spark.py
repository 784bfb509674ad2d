"""A local SparkSession set up the way binlog-cdc's demo, tests and benchmarks use it."""

from __future__ import annotations

import os
import sys


def local_spark(app_name: str = "binlog-cdc", cores: int = 2):
    """``local[cores]``, no UI or console progress bars, UTC session time zone, 2 shuffle
    partitions, Python workers on this interpreter, log level ERROR."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
