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
