"""binlog-cdc core: a sans-IO MySQL/MariaDB binlog parser, GTID sets and a replica client.

Nothing in this package imports Spark.
"""

__version__ = "0.1.0"
