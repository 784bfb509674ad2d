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


def typed_upserts(spark, server, options: dict, tmp_path, image):
    """A typed-mode stream of *options* into Delta tables under ``tmp_path/"delta"`` through a
    :class:`~streaming.delta.DeltaUpserter` (availableNow, one checkpoint): ``(run, images,
    types)``. ``run()`` drains the stream; ``images``: ``{id: image(after struct)}`` of what it
    delivered (deleted ids removed); ``types``: the after struct's Spark types by column."""
    from streaming.delta import DeltaUpserter

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
