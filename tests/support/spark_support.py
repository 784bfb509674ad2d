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


def replayed_rows(reader, start: dict, end: dict) -> list:
    """(op, after dict) of the batch *start*..*end* as *reader* plans it and its tasks decode
    it, in ``seq`` order (a reader driven without Spark: a new one is a restarted driver that
    plans a replayed batch from its two offsets alone)."""
    rows = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            rows += batch.to_pylist()
    return [(r["op"], json.loads(r["after"])) for r in sorted(rows, key=lambda r: r["seq"])]


def typed_upserts(spark, server, options: dict, tmp_path, image):
    """A typed-mode stream of *options* into Delta tables under ``tmp_path/"delta"`` through a
    :class:`~streaming.sinks.delta.upserter.DeltaUpserter` (availableNow, one checkpoint): ``(run, images,
    types)``. ``run()`` drains the stream; ``images``: ``{id: image(after struct)}`` of what it
    delivered (deleted ids removed); ``types``: the after struct's Spark types by column."""
    from streaming.sinks.delta.upserter import DeltaUpserter

    p = server.cdc_params()
    up = DeltaUpserter(tmp_path / "delta", host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="typed-upserts")
    images: dict = {}
    types: dict = {}

    def batch(df, batch_id):
        types.update((f.name, f.dataType) for f in df.schema["after"].dataType.fields)
        for r in df.select("before", "after").collect():
            if r.after is not None:
                images[r.after.id] = image(r.after)
            else:
                images.pop(r.before.id, None)
        up(df, batch_id)

    def run():
        q = (spark.readStream.format("binlog-cdc").options(**options).load().writeStream
             .foreachBatch(batch).option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(240)
        assert q.exception() is None, q.exception()
    return run, images, types


def select_all(server, db: str, table: str, value=lambda v: v) -> tuple[list[str], list[tuple]]:
    """``SELECT *`` of ``db.table``: (column names, rows with *value* applied to each value,
    sorted by their repr)."""
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
    finally:
        conn.close()
    return names, sorted((tuple(value(v) for v in r) for r in rows), key=repr)


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
