"""An account without a privilege the Spark source needs, on MySQL 9.7 and MariaDB 10.11: the
stream, a batch read and the job runner fail with the binlog-cdc error that names the privilege
in the server's words and the GRANT to run (the job: one line, exit 2) -- not the driver's raw
``OperationalError (1227, ...)``."""

from __future__ import annotations

import json

import pytest

pyspark = pytest.importorskip("pyspark")

from cdc.errors import PrivilegeError  # noqa: E402
from streaming.apps.runtime import cdc_error  # noqa: E402
from support.job_toml import write_job_toml  # noqa: E402
from support.accounts import account, monitor_privilege  # noqa: E402,F401 -- a fixture

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mysql-9.7", "mariadb-10.11")]


def options(server, user: str, **extra) -> dict:
    p = server.cdc_params()
    start = server.current_position()
    return {"host": p["host"], "port": str(p["port"]), "user": user, "password": f"pw-{user}",
            "includeTables": "privs.*", "serverId": "7301",
            "startingPosition": json.dumps({"file": start[0], "pos": start[1]}), **extra}


def reader(spark, opts: dict, stream: bool):
    r = spark.readStream.format("binlog-cdc") if stream else spark.read.format("binlog-cdc")
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def privilege_error(failure) -> str:
    """The binlog-cdc error a Spark failure carries: a PrivilegeError, its message."""
    err = cdc_error(failure)
    assert isinstance(err, PrivilegeError), str(failure)[-3000:]
    return str(err)


def run_stream(spark, opts: dict, tmp_path):
    q = (reader(spark, opts, True).writeStream.format("memory").queryName("privs")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
         .start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(180)
    return e.value


@pytest.fixture
def table(server):
    server.execute("CREATE DATABASE IF NOT EXISTS privs")
    server.execute("CREATE TABLE IF NOT EXISTS privs.t (id INT PRIMARY KEY, a VARCHAR(10))")
    return "privs.t"


def test_stream_and_batch_without_the_binlog_monitor_privilege(spark, server, account, table,
                                                              tmp_path):
    user = account("spark_nomon", "REPLICATION SLAVE, SELECT")
    opts = options(server, user)
    words = monitor_privilege(server)
    for failure in (run_stream(spark, opts, tmp_path),
                    pytest.raises(Exception, reader(spark, dict(opts, endingPosition="latest"),
                                                    False).collect).value):
        msg = privilege_error(failure)
        assert f"lacks {words} on " in msg and f"GRANT REPLICATION SLAVE, {words}" in msg, msg
        assert f"TO '{user}'@'%';" in msg


def test_stream_without_replication_slave(spark, server, account, table, tmp_path):
    user = account("spark_noslave", f"{monitor_privilege(server)}, SELECT")
    msg = privilege_error(run_stream(spark, options(server, user), tmp_path))
    assert "lacks REPLICATION SLAVE on " in msg and f"TO '{user}'@'%';" in msg, msg


def test_typed_stream_without_select_on_its_table(spark, server, account, table):
    user = account("spark_nosel", f"REPLICATION SLAVE, {monitor_privilege(server)}")
    opts = options(server, user, table=table)
    del opts["includeTables"]
    with pytest.raises(Exception) as e:
        reader(spark, opts, True)
    msg = privilege_error(e.value)
    assert "lacks SELECT on privs.t" in msg and f"GRANT SELECT ON `privs`.* TO '{user}'@'%';" \
        in msg, msg


def test_the_job_without_the_binlog_monitor_privilege(spark, server, account, table, tmp_path,
                                                     capsys, monkeypatch):
    from streaming.apps.job import main
    user = account("job_nomon", "REPLICATION SLAVE, SELECT")
    start = server.current_position()
    monkeypatch.setenv("TEST_PRIVS_PASSWORD", f"pw-{user}")
    cfg = write_job_toml(tmp_path / "job.toml", server, "privs.*", start, user=user,
                         password_env="TEST_PRIVS_PASSWORD", delta=tmp_path / "delta",
                         app_id="privs-test", checkpoint=tmp_path / "chk", trigger="availableNow",
                         stream_extra='query_name = "privs_test"\n')
    capsys.readouterr()
    rc = main([str(cfg)])
    err = capsys.readouterr().err.strip().splitlines()
    words = monitor_privilege(server)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"binlog-cdc job: user '{user}' ('{user}'@'%') lacks {words} on ")
    assert err[0].endswith(f"TO '{user}'@'%';")
