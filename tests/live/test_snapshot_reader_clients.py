"""The chunk reader with each client library (PyMySQL, mysqlclient): a table chunked by a
composite key of binary and temporal columns (key values travel as offsets: base64, text) reads
every row once and the same values with both."""

from __future__ import annotations

import pytest

from cdc.replica.config import ReplicaConfig
from cdc.replica.sql import connect
from cdc.snapshot.plan import describe_table, next_bound
from cdc.snapshot.reader import CLIENTS, SnapshotChunkReader, connect_for_snapshot

pytestmark = pytest.mark.server

DB = "snap_clients"


def _read(config, client: str, chunk: int) -> tuple[list, int]:
    plain = connect(config)

    def query(sql, args=None):
        with plain.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    table = describe_table(query, f"{DB}.t")
    conn = connect_for_snapshot(config, client)
    rows, chunks, after = [], 0, None
    try:
        while True:
            upto = next_bound(query, table, after, chunk)
            with SnapshotChunkReader(conn, table, after, upto) as r:
                assert r.position.exact and r.position.position.pos > 4
                for batch in r.batches(rows_per_batch=5):
                    rows.extend(batch)
            chunks += 1
            if upto is None:
                return rows, chunks
            after = upto
    finally:
        conn.close()
        plain.close()


def test_both_clients_read_every_row_once_with_the_same_values(mariadb):
    pytest.importorskip("MySQLdb")
    mariadb.execute(f"CREATE DATABASE {DB}")
    mariadb.execute("CREATE TABLE t (k VARBINARY(8) NOT NULL, at DATETIME(3) NOT NULL, "
                    "amount DECIMAL(20,6), note VARCHAR(20), PRIMARY KEY (k, at))", database=DB)
    mariadb.execute("INSERT INTO t SELECT UNHEX(LPAD(HEX(seq % 5), 2, '0')), "
                    "'2024-01-01 00:00:00.001' + INTERVAL seq SECOND, seq / 7, "
                    "IF(seq % 4, CONCAT('é', seq), NULL) FROM seq_1_to_103", database=DB)
    p = mariadb.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"])
    got = {c: _read(config, c, 7) for c in CLIENTS}
    rows, chunks = got["pymysql"]
    assert chunks == 15 and len(rows) == 103
    assert len({(r[0], r[1]) for r in rows}) == 103                 # each row once
    assert got["mysqlclient"] == got["pymysql"]
    assert [repr(v) for v in got["mysqlclient"][0][0]] == [repr(v) for v in rows[0]]
    assert rows[0][0] == b"\x00" and str(rows[0][2]) == "0.714286" and rows[0][3] == "é5"
