"""``binlog-cdc lag --checkpoint DIR``: the lag of a real Spark query, read from its checkpoint,
against the real MariaDB."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def _lag(mariadb, checkpoint, *more) -> subprocess.CompletedProcess:
    p = mariadb.cdc_params()
    return subprocess.run([sys.executable, "-m", "cdc", "lag", "--host", p["host"], "--port",
                           str(p["port"]), "--user", p["user"], "--password", p["password"],
                           "--checkpoint", str(checkpoint), *more],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def _report(mariadb, checkpoint) -> dict:
    r = _lag(mariadb, checkpoint, "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _drain(spark, options, checkpoint):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240) and q.exception() is None, q.exception()


def test_lag_of_a_checkpoint(spark, mariadb, db, tmp_path):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(200))")
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    checkpoint = tmp_path / "ckpt"
    options = source_options(mariadb, db, start)
    _drain(spark, options, checkpoint)

    drained = mariadb.current_position()
    rep = _report(mariadb, checkpoint)
    assert (rep["file"], rep["pos"]) == drained == (rep["server_file"], rep["server_pos"])
    assert (rep["behind_bytes"], rep["behind_transactions"], rep["lag_seconds"]) == (0, 0, 0)
    batch = rep["batch"]

    # three transactions the query has not read; the oldest committed at least 2 s ago
    mariadb.execute(f"INSERT INTO {db}.t VALUES (3, '{'x' * 150}')")
    first_commit = time.time()
    time.sleep(2.2)
    mariadb.execute(f"UPDATE {db}.t SET v = 'y' WHERE id = 1")
    mariadb.execute(f"DELETE FROM {db}.t WHERE id = 2")
    end = mariadb.current_position()
    assert end[0] == drained[0]
    rep = _report(mariadb, checkpoint)
    assert (rep["file"], rep["pos"], rep["batch"]) == (*drained, batch)
    assert (rep["server_file"], rep["server_pos"]) == end
    assert rep["behind_bytes"] == end[1] - drained[1] > 0
    assert rep["behind_transactions"] == 3 and rep["transactions_estimated"] is False
    assert 2 <= rep["lag_seconds"] <= time.time() - first_commit + 1.5, rep

    text = _lag(mariadb, checkpoint)
    assert text.returncode == 0, text.stderr
    assert f"behind: {end[1] - drained[1]} bytes, 3 transactions, " in text.stdout
    assert f"committed up to {drained[0]}:{drained[1]}" in text.stdout

    _drain(spark, options, checkpoint)
    rep = _report(mariadb, checkpoint)
    assert rep["batch"] > batch and (rep["file"], rep["pos"]) == end
    assert (rep["behind_bytes"], rep["behind_transactions"], rep["lag_seconds"]) == (0, 0, 0)


@pytest.mark.parametrize("where,message", [
    ("empty", "is not the checkpoint directory of a streaming query"),
    ("s3a://bucket/ckpt", "only local checkpoint directories are read"),
])
def test_lag_checkpoint_mistakes(mariadb, tmp_path, where, message):
    r = _lag(mariadb, tmp_path if where == "empty" else where)
    assert r.returncode == 2
    assert r.stderr.startswith("binlog-cdc: error: ") and message in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
