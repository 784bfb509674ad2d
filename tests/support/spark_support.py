"""Helpers shared by the Spark test modules."""

from __future__ import annotations

import json


def source_options(mariadb, db: str, start, **extra) -> dict:
    """Options of the binlog-cdc source reading the tables of *db* on the harness's MariaDB
    from the binlog position *start* (``(file, pos)``); *extra* adds or overrides options."""
    p = mariadb.cdc_params()
    opts = {"host": p["host"], "port": str(p["port"]), "user": p["user"],
            "password": p["password"], "includeTables": f"{db}.*",
            "startingPosition": json.dumps({"file": start[0], "pos": start[1]})}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def fresh_database(server, name: str) -> str:
    """Database *name* on *server*, dropped and made again (utf8mb4)."""
    server.execute(f"DROP DATABASE IF EXISTS {name}")
    server.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    return name


def batch_rows(spark, options: dict, checkpoint, row, timeout: float = 240) -> dict:
    """Run the binlog-cdc stream of *options* with availableNow into foreachBatch:
    ``{batch id: [row(r) for each row in seq order]}``."""
    got: dict = {}

    def keep(df, batch_id):
        got[batch_id] = [row(r) for r in df.orderBy("seq").collect()]

    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(keep)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(timeout), "availableNow query did not stop"
    if q.exception() is not None:
        raise AssertionError(f"query failed: {q.exception()}")
    return got
