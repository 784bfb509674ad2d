"""ENUM/SET members with 4-byte characters on MySQL 9.7, where information_schema and SHOW CREATE
TABLE show such a character as '?' (MySQL keeps member names as utf8mb3) and MariaDB's TYPE OF
variables do not exist: the members come from the table's rows (chosen by the server's flavour),
and every reader of a table's columns -- typed mode, the DeltaUpserter, the snapshot -- gets them
through the same path. Values are compared with the server's own SELECT."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from cdc.replica.sql import connect  # noqa: E402
from cdc.replica.config import ReplicaConfig  # noqa: E402
from streaming.contract.tables import columns_from_server  # noqa: E402

from support.spark_support import source_options, typed_upserts  # noqa: E402

pytestmark = [pytest.mark.server]

DB = "members4"
TABLE = ("CREATE TABLE e (id INT PRIMARY KEY, "
         "e ENUM('a😀', '?', 'b''q', 'ü𝄞') CHARACTER SET utf8mb4, "
         "s SET('x😀', 'y', '🐍z') CHARACTER SET utf8mb4, "
         "u ENUM('p', '🎉u', 'q') CHARACTER SET utf16, "
         "g SET('中𠀀', 'k', '€') CHARACTER SET gb18030, "
         "l ENUM('é', 'ß', 'x') CHARACTER SET latin1)")
FIRST = ("INSERT INTO e VALUES (1, 'a😀', 'x😀,🐍z', '🎉u', '中𠀀,€', 'é'), "
         "(2, '?', 'y', 'p', 'k', 'ß'), (3, 'ü𝄞', '🐍z', 'q', '中𠀀', 'x'), "
         "(4, 'b''q', '', '🎉u', '', NULL)")
LATER = ("INSERT INTO e VALUES (5, 'ü𝄞', 'x😀,y', 'q', '€,k', 'é'); "
         "UPDATE e SET e = 'a😀', s = '🐍z', u = 'p', g = '中𠀀,k' WHERE id = 2; "
         "DELETE FROM e WHERE id = 3")
COLUMNS = ("id", "e", "s", "u", "g", "l")


def _setup(server) -> None:
    server.execute(f"DROP DATABASE IF EXISTS `{DB}`")
    server.execute(f"CREATE DATABASE `{DB}`")
    server.execute(TABLE, database=DB)
    server.execute(FIRST, database=DB)


def _select(server) -> dict:
    conn = server.connect(database=DB)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, e, s, u, g, l FROM e ORDER BY id")
            return {r[0]: tuple(r) for r in cur.fetchall()}
    finally:
        conn.close()


def _config(server) -> ReplicaConfig:
    p = server.cdc_params()
    return ReplicaConfig(p["host"], p["port"], p["user"], p["password"])


@pytest.mark.servers("mysql-9.7")
def test_typed_columns_read_members_on_mysql(server):
    """The typed-mode column reader (a plain connection, as streaming.contract.tables is given) on MySQL:
    the members information_schema garbles come from the rows holding them."""
    _setup(server)
    raw = server.execute("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                         "TABLE_SCHEMA = %s AND TABLE_NAME = 'e' AND COLUMN_NAME = 'e'", (DB,))
    assert raw[0][0] == "enum('a?','?','b''q','ü?')"      # the premise
    conn = connect(_config(server))
    try:
        cols = {c.name: c for c in columns_from_server(conn, DB, "e")}
    finally:
        conn.close()
    assert cols["e"].enum_values == ["a😀", "?", "b'q", "ü𝄞"]
    assert cols["s"].set_values == ["x😀", "y", "🐍z"]
    assert cols["u"].enum_values == ["p", "🎉u", "q"]
    assert cols["g"].set_values == ["中𠀀", "k", "€"]
    assert cols["l"].enum_values == ["é", "ß", "x"]


def _as_select(row: dict) -> tuple:
    return tuple(row[c] for c in COLUMNS)


def _same(got: tuple, want: tuple) -> bool:
    """SET values compare as sets of members (PyMySQL gives a SET as a Python set)."""
    for g, w in zip(got, want):
        if isinstance(w, (set, frozenset)):
            if set(g.split(",") if g else []) != set(w):
                return False
        elif g != w:
            return False
    return True


@pytest.mark.spark
@pytest.mark.servers("mysql-9.7")
def test_typed_snapshot_and_delta_with_4_byte_members_equal_select(server, spark,
                                                                  tmp_path: Path):
    """On MySQL 9.7: a typed-mode stream starting with a snapshot, then the binlog, into Delta
    through the DeltaUpserter: the typed images and the Delta table equal the server's
    SELECT."""
    _setup(server)
    opts = source_options(server, DB, ("x", 4), table=f"{DB}.e")
    opts.pop("includeTables")
    opts["startingPosition"] = "snapshot"
    run, images, _types = typed_upserts(spark, server, opts, tmp_path,
                                        lambda a: _as_select(a.asDict()))
    run()                                           # the snapshot
    want = _select(server)
    assert set(images) == set(want) and all(_same(images[k], want[k]) for k in want), images
    for stmt in LATER.split("; "):
        server.execute(stmt, database=DB)
    run()                                           # the binlog after it
    want = _select(server)
    assert set(images) == set(want) and all(_same(images[k], want[k]) for k in want), images
    delta = DeltaTable(str(tmp_path / "delta" / DB / "e")).to_pyarrow_table().to_pylist()
    got = {r["id"]: _as_select(r) for r in delta}
    assert set(got) == set(want) and all(_same(got[k], want[k]) for k in want), (got, want)
