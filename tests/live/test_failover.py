"""Failover: a stream reading a primary resumes on its promoted GTID replica by GTID.

The drill: 2,000 changes read from the primary; 500 more written and replicated; the primary
SIGKILLed; the replica (another binlog basename, rotated, with local transactions) promoted; 500
more written on it; the same stream resumed against it. Nothing lost, nothing twice, and the
output equals SELECT * on the new primary. A replica that never received transactions the
stream already delivered is refused with one clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.binlog.transactions import TableFilter
from cdc.errors import DivergedServerError
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig

from support.replica_pair import replica_pair

pytestmark = [pytest.mark.server]

SERVERS = ["mariadb-10.11", "mysql-9.7"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=SERVERS)
def pair(request, tmp_path):
    p = replica_pair(request.param, tmp_path)
    p.primary.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(20))")
    p.wait_replicated()
    try:
        yield p
    finally:
        p.cleanup()


def insert(server, first: int, last: int) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for i in range(first, last + 1):
            cur.execute("INSERT INTO shop.items VALUES (%s, %s)", (i, f"v{i}"))
            conn.commit()


def client(server, start, server_id=7001) -> ReplicaClient:
    p = server.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"], server_id=server_id,
                           table_filter=TableFilter(["shop.items"], []))
    return ReplicaClient(config, start=start, blocking=False)


def read(server, start) -> tuple[list[int], object]:
    c = client(server, start)
    ids = [ch.after[0] for ch in c.changes()]
    return ids, c.position


def fail_over(pair) -> None:
    """Write 500 changes the replica gets; kill the primary; promote the replica; write 500
    changes on it."""
    insert(pair.primary, 2001, 2500)
    pair.wait_replicated()
    pair.primary.kill()
    pair.promote()
    insert(pair.replica, 2501, 3000)


def tail(server, *args) -> subprocess.CompletedProcess:
    p = server.cdc_params()
    env = dict(os.environ, BINLOG_CDC_PASSWORD=p["password"], PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "cdc", "tail", "--host", p["host"], "--port",
                           str(p["port"]), "--user", p["user"], "--server-id", "7002",
                           "--non-blocking", "--format", "jsonl", "--tables", "shop.items",
                           *args], env=env, capture_output=True, text=True, timeout=300)


def report(what: str, delivered: list[int], expected: list[int]) -> None:
    lost = len(set(expected) - set(delivered))
    twice = len(delivered) - len(set(delivered))
    print(f"{what}: {len(delivered)} changes delivered, lost {lost}, duplicated {twice}")
    assert (lost, twice) == (0, 0) and sorted(delivered) == sorted(expected)


def test_the_replica_client_and_tail_resume_by_gtid_on_the_promoted_replica(pair):
    start = Start.gtid_text(pair.gtid_state(pair.primary))
    insert(pair.primary, 1, 2000)
    before, at = read(pair.primary, start)
    assert before == list(range(1, 2001))
    fail_over(pair)
    after, _ = read(pair.replica, at)
    report(f"{pair.primary.FLAVOR} replica client", before + after,
           [r[0] for r in pair.replica.execute("SELECT id FROM shop.items")])
    assert after == list(range(2001, 3001))
    out = tail(pair.replica, "--gtid", str(at.gtid))
    assert out.returncode == 0, out.stderr
    tailed = [json.loads(line)["after"]["id"] for line in out.stdout.splitlines()]
    report(f"{pair.primary.FLAVOR} tail --gtid", tailed, list(range(2001, 3001)))


@pytest.fixture
def diverged_position(pair):
    """A position past 10 transactions of the old primary the promoted replica never got."""
    start = Start.gtid_text(pair.gtid_state(pair.primary))
    insert(pair.primary, 1, 2000)
    insert(pair.primary, 2001, 2500)
    pair.wait_replicated()
    pair.stop_replication()
    insert(pair.primary, 2501, 2510)
    ids, at = read(pair.primary, start)
    assert ids == list(range(1, 2511))
    pair.primary.kill()
    pair.promote()
    insert(pair.replica, 2501, 3000)
    return at


def test_a_replica_that_missed_delivered_transactions_is_refused(pair, diverged_position):
    at = diverged_position
    with pytest.raises(DivergedServerError, match="never executed .*already delivered"):
        read(pair.replica, at)
    out = tail(pair.replica, "--gtid", str(at.gtid))
    assert out.returncode == 2 and "never executed" in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in out.stderr
    assert out.stdout == ""


def spark_options(server, start: str) -> dict:
    p = server.cdc_params()
    return {"host": p["host"], "port": str(p["port"]), "user": p["user"],
            "password": p["password"], "includeTables": "shop.items", "serverId": "7100",
            "startingPosition": start}


def run_available_now(spark, options: dict, out: Path, checkpoint: Path):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(300), "availableNow query did not stop"
    assert q.exception() is None, q.exception()


@pytest.mark.spark
def test_the_spark_query_resumes_by_gtid_on_the_promoted_replica(pair, spark, tmp_path):
    file, pos = pair.primary.current_position()     # a file start: offsets carry the GTID state
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    insert(pair.primary, 1, 2000)
    run_available_now(spark, spark_options(pair.primary, f"{file}:{pos}"), out, ckpt)
    assert spark.read.parquet(str(out)).count() == 2000
    fail_over(pair)
    run_available_now(spark, spark_options(pair.replica, f"{file}:{pos}"), out, ckpt)
    rows = spark.read.parquet(str(out)).collect()
    delivered = [json.loads(r.after)["id"] for r in rows]
    table = sorted(pair.replica.execute("SELECT id, v FROM shop.items"))
    report(f"{pair.primary.FLAVOR} Spark", delivered, [r[0] for r in table])
    assert sorted((a["id"], a["v"]) for a in (json.loads(r.after) for r in rows)) == table
