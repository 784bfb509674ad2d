"""MariaDB 11.8's VECTOR columns, which its binlog logs as a VARBINARY (type VARCHAR, binary
charset, no metadata saying "vector" even with binlog_row_metadata=FULL): the schema
(information_schema's ``vector(n)``, or the history's) makes them MySQL's VECTOR representation,
a list of float32 values, under every metadata level -- the library's values, the JSON envelope,
typed mode's array<float>, Delta and the snapshot. Values are compared with the server's SELECT
(the stored bytes) and ``VEC_ToText`` (which prints each value as ``%g``)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.cli.changes import change_json
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy

pytestmark = [pytest.mark.server]

ROOT = Path(__file__).resolve().parents[2]
DB = "vec"
TABLE = ("CREATE TABLE a (id INT PRIMARY KEY, s VARCHAR(20), v VECTOR(3), w VECTOR(70), "
         "vb VARBINARY(12))")
WIDE = "[" + ",".join(str(i / 4 - 8) for i in range(70)) + "]"
WRITES = [
    "INSERT INTO a VALUES (1, 'x', VEC_FromText('[0.5,-1,2.25]'), NULL, x'0000003F000080BF00001040'), "
    f"(2, NULL, NULL, VEC_FromText('{WIDE}'), NULL), "
    "(3, 'y', VEC_FromText('[0.001,-3.5,123456.789]'), NULL, '')",
    "UPDATE a SET v = VEC_FromText('[1,2,3]'), w = VEC_FromText('" + WIDE + "') WHERE id = 1",
    "DELETE FROM a WHERE id = 3",
]


def _floats(raw: bytes | None):
    return None if raw is None else list(struct.unpack("<%df" % (len(raw) // 4), raw))


def _vec_text(values) -> str:
    """VEC_ToText's text of float32 *values* (each printed as %g)."""
    return "[" + ",".join("%g" % x for x in values) + "]"


def _setup(server) -> tuple[str, int]:
    server.execute(f"DROP DATABASE IF EXISTS `{DB}`")
    server.execute(f"CREATE DATABASE `{DB}`")
    server.execute(TABLE, database=DB)
    start = server.current_position()
    for sql in WRITES:
        server.execute(sql, database=DB)
    return start


def _selected(server, ids=None) -> dict:
    """``{id: (s, v floats, w floats, vb)}`` of the server's SELECT, VEC_ToText checked."""
    out = {}
    for id_, s, v, w, vb, vt, wt in server.execute(
            "SELECT id, s, v, w, vb, VEC_ToText(v), VEC_ToText(w) FROM a ORDER BY id",
            database=DB):
        v, w = _floats(v), _floats(w)
        assert vt == (None if v is None else _vec_text(v))
        assert wt == (None if w is None else _vec_text(w))
        out[id_] = (s, v, w, vb)
    return out


def _client(server, start) -> ReplicaClient:
    p = server.cdc_params()
    return ReplicaClient(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                       server_id=7401,
                                       retry=RetryPolicy(max_attempts=2, initial_backoff=0.05)),
                         start=Start.at(*start), blocking=False)


@pytest.mark.servers("mariadb-11.8")
@pytest.mark.parametrize("metadata", ["NO_LOG", "MINIMAL", "FULL"])
def test_vector_values_equal_select_under_every_metadata_level(server, mariadb_factory,
                                                               metadata):
    """The library's values and the JSON envelope: lists of floats equal to the stored float32
    values, a VARBINARY beside them still bytes."""
    server = mariadb_factory(extra_options={"binlog_row_metadata": metadata})
    start = _setup(server)
    client = _client(server, start)
    try:
        changes = [c for tx in client.transactions() for c in tx.changes() if c.table == "a"]
    finally:
        client.close()
    state = {}
    for c in changes:
        if c.op == "d":
            del state[c.before[0]]
        else:
            state[c.after[0]] = tuple(c.after[1:])
    assert state == _selected(server)
    first = json.loads(change_json(changes[0]))
    assert first["after"]["v"] == [0.5, -1.0, 2.25]
    assert first["after"]["vb"] == "AAAAPwAAgL8AABBA"             # base64 of the bytes
    assert [type(x) for x in changes[1].after[3]] == [float] * 70   # 2 length bytes (280)


@pytest.mark.servers("mariadb-11.8")
@pytest.mark.parametrize("metadata", ["NO_LOG", "FULL"])
def test_a_vector_altered_to_varbinary_and_back(server, mariadb_factory, metadata):
    """The same table-map shape before and after ALTERs between VECTOR(3) and VARBINARY(12)
    (a history read at the stream's start, then following the DDL): each row decodes by its
    table's version."""
    server = mariadb_factory(extra_options={"binlog_row_metadata": metadata})
    server.execute(f"CREATE DATABASE `{DB}`")
    server.execute("CREATE TABLE b (id INT PRIMARY KEY, v VECTOR(3))", database=DB)
    client = _client(server, server.current_position())
    try:
        assert list(client.transactions()) == []
        client.reseed_schema()              # the history as of here
        raw = struct.pack("<3f", 0.5, -1, 2.25)
        for i, sql in enumerate(["ALTER TABLE b MODIFY v VARBINARY(12)",
                                 "ALTER TABLE b MODIFY v VECTOR(3)", None]):
            server.execute("INSERT INTO b VALUES (%s, %s)", (i, raw), database=DB)
            if sql:
                server.execute(sql, database=DB)
        rows = [c.after for tx in client.transactions() for c in tx.changes() if c.table == "b"]
    finally:
        client.close()
    assert rows == [(0, [0.5, -1.0, 2.25]), (1, raw), (2, [0.5, -1.0, 2.25])]


@pytest.mark.servers("mariadb-11.8")
def test_decode_follows_the_files_create_table(server, tmp_path):
    """``decode`` of the binlog files: the CREATE TABLE in them makes the VECTOR columns lists
    of floats in JSON; the text prints their row lines as mariadb-binlog -v does."""
    since = server.current_position()[0]
    _setup(server)
    files = [str(f) for f in server.snapshot_binlogs(tmp_path / "binlogs", since_file=since)]

    def decode(*args) -> bytes:
        return subprocess.run([sys.executable, "-m", "cdc", "decode", *args, *files],
                              capture_output=True, cwd=ROOT, check=True).stdout
    changes = [json.loads(line) for line in decode("--format", "jsonl").splitlines()]
    state = {}
    for c in changes:
        if c["table"] == "a":
            if c["op"] == "d":
                del state[c["before"]["id"]]
            else:
                state[c["after"]["id"]] = c["after"]
    assert {k: (r["s"], r["v"], r["w"]) for k, r in state.items()} == {
        k: (s, v, w) for k, (s, v, w, _vb) in _selected(server).items()}
    ref = subprocess.run([server.program("mariadb-binlog"), "-v", *files],
                         capture_output=True, check=True).stdout

    def rows(text: bytes) -> list[bytes]:
        return [line for line in text.splitlines() if line.startswith(b"### ")]
    assert rows(decode()) and rows(decode()) == rows(ref)


@pytest.mark.servers("mariadb-11.8")
def test_snapshot_rows_equal_the_binlogs(server):
    """The snapshot reads a VECTOR with a SELECT: its rows render the JSON the binlog's do."""
    from cdc.replica.sql import SqlSession, connect
    from cdc.snapshot.plan import describe_table
    from cdc.snapshot.reader import SnapshotChunkReader, connect_for_snapshot
    from cdc.values.render import row_json

    start = _setup(server)
    client = _client(server, start)
    binlog = {}
    try:
        for tx in client.transactions():
            for c in tx.changes():
                if c.table != "a":
                    continue
                if c.op == "d":
                    binlog.pop(c.before[0])
                else:
                    binlog[c.after[0]] = row_json(c.columns, c.after)
    finally:
        client.close()
    config = client.config
    session = SqlSession(lambda: connect(config))
    try:
        table = describe_table(session.query, f"{DB}.a")
    finally:
        session.close()
    conn = connect_for_snapshot(config)
    try:
        with SnapshotChunkReader(conn, table, None, None, config=config) as reader:
            names = [c.name for c in table.column_defs()]
            snap = {row[0]: row_json(names, row) for batch in reader.batches() for row in batch}
    finally:
        conn.close()
    assert snap == binlog
    assert json.loads(snap[1])["v"] == [1.0, 2.0, 3.0]


@pytest.mark.spark
@pytest.mark.servers("mariadb-11.8")
def test_typed_snapshot_and_delta_vectors_equal_select(server, spark, tmp_path: Path):
    """A typed-mode stream starting with a snapshot, then the binlog, into Delta through the
    DeltaUpserter: VECTOR is array<float> in the images and in Delta, equal to the SELECT."""
    pytest.importorskip("deltalake")
    from deltalake import DeltaTable
    from pyspark.sql.types import ArrayType, FloatType

    from support.spark_support import source_options, typed_upserts

    _setup(server)
    opts = source_options(server, DB, ("x", 4), table=f"{DB}.a")
    opts.pop("includeTables")
    opts["startingPosition"] = "snapshot"
    run, images, types = typed_upserts(spark, server, opts, tmp_path,
                                       lambda a: (a.s, a.v, a.w, a.vb))
    run()                                           # the snapshot
    assert images == _selected(server)
    assert types["v"] == ArrayType(FloatType()) and types["w"] == ArrayType(FloatType())
    server.execute("INSERT INTO a VALUES (7, 'z', VEC_FromText('[-0.25,8,0.125]'), NULL, NULL)",
                   database=DB)
    server.execute("UPDATE a SET v = NULL, w = VEC_FromText('" + WIDE + "') WHERE id = 2",
                   database=DB)
    run()                                           # the binlog after it
    want = _selected(server)
    assert images == want
    delta = DeltaTable(str(tmp_path / "delta" / DB / "a")).to_pyarrow_table().to_pylist()
    assert {r["id"]: (r["s"], r["v"], r["w"], r["vb"]) for r in delta} == want
