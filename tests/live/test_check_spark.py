"""The Spark source and the job runner run the FAIL checks of ``binlog-cdc check`` before a
snapshot starts, on MariaDB 10.11 and MySQL 9.7: a stream that starts with a snapshot of a
server whose binlog_format is STATEMENT read the whole snapshot (hours on a real database)
before its binlog phase failed; it now fails before any chunk is read, with the one line that
says what to do (the first line of Spark's error; the job's one line on stderr, exit 2)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark")

from pyspark.errors import StreamingQueryException  # noqa: E402

from support.job_toml import write_job_toml  # noqa: E402
from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]


def statement_server(mariadb_factory):
    """A new server of the test's kind with shop.orders (2,000 rows) and binlog_format
    STATEMENT; (server, the check's FAIL line)."""
    server = mariadb_factory()
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, n INT)")
    server.execute("CREATE TABLE shop.d (n INT)")
    server.execute("INSERT INTO shop.d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)")
    server.execute("INSERT INTO shop.orders SELECT a.n + 10*b.n + 100*c.n + 1000*e.n + 1, a.n "
                   "FROM shop.d a, shop.d b, shop.d c, shop.d e WHERE e.n < 2")
    server.execute("DROP TABLE shop.d")
    server.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    return server, (f"binlog_format is STATEMENT on 127.0.0.1:{server.port}; row-based CDC needs "
                    f"ROW: run SET GLOBAL binlog_format = 'ROW' (affects new sessions) and put "
                    f"binlog_format=ROW in the [mysqld] section of my.cnf")


def test_a_snapshot_of_a_statement_format_server_fails_before_reading(spark, server,
                                                                      mariadb_factory, tmp_path):
    """(server: the kind of server; the test makes a new one of that kind)"""
    server, message = statement_server(mariadb_factory)
    assert server.execute("SELECT COUNT(*) FROM shop.orders")[0][0] == 2000
    opts = source_options(server, "shop", ("x", 4), startingPosition="snapshot",
                          snapshotChunkRows=200, maxEventsPerTrigger=400)
    got: list = []

    def fb(df, batch_id):
        got.extend(df.select("op").collect())

    t = time.monotonic()
    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as e:
        q.awaitTermination(300)
    took = time.monotonic() - t
    assert got == []                                  # 2000 snapshot rows before
    assert f"cdc.errors.ServerConfigError: {message}" in str(e.value).splitlines()[0]
    assert "Current Committed Offsets: {}" in str(e.value)    # failed as the query started
    assert took < 20, f"took {took:.1f} s"


def test_the_job_fails_before_its_snapshot(server, mariadb_factory, tmp_path, capsys,
                                           monkeypatch):
    from streaming.apps.job import main
    server, message = statement_server(mariadb_factory)
    p = server.cdc_params()
    monkeypatch.setenv("TEST_CHECK_PASSWORD", p["password"])
    cfg = write_job_toml(tmp_path / "job.toml", server, "shop.*", "snapshot",
                         password_env="TEST_CHECK_PASSWORD", delta=tmp_path / "delta",
                         app_id="check-test", checkpoint=tmp_path / "chk", trigger="availableNow")
    capsys.readouterr()
    t = time.monotonic()
    rc = main([str(cfg)])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.splitlines() == [f"binlog-cdc job: {message}"], err
    assert not (tmp_path / "delta").exists() and not (tmp_path / "chk").exists()
    assert time.monotonic() - t < 10
