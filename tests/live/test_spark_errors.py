"""What a Spark user sees when a binlog-cdc source fails on a user's mistake: the first line of
the error Spark raises carries the binlog-cdc error that says what to do (not ``Traceback (most
recent call last):`` followed by 18 lines of frames), and nothing else of it precedes Spark's
own query description. The message is the one ``binlog-cdc check`` prints for the same mistake
(or the options parser's)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.errors import AnalysisException, StreamingQueryException  # noqa: E402

from cdc.check import FAIL, run_checks  # noqa: E402
from cdc.errors import ConfigurationError  # noqa: E402
from streaming.source.options import SourceOptions  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


def options(server, **extra) -> dict:
    p = server.cdc_params()
    return {"host": p["host"], "port": str(p["port"]), "user": p["user"],
            "password": p["password"], "includeTables": "errs.*", "serverId": "7302",
            "startingPosition": "latest", **extra}


def check_line(opts: dict) -> tuple[str, str]:
    """The first FAIL of ``binlog-cdc check`` for *opts*: (error class name, message)."""
    o = SourceOptions.parse(opts)
    f = o.table_filter()
    fails = [x for x in run_checks(o.replica_config(), include=f.include if f else ())
             if x.status == FAIL]
    assert fails
    return fails[0].error.__name__, fails[0].message


def stream_failure(spark, opts: dict, tmp_path) -> str:
    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .format("memory").queryName("errs").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as e:
        q.awaitTermination(120)
    return str(e.value)


def shown_first(text: str, name: str, message: str) -> None:
    """*text*'s first line ends with ``cdc.errors.<name>: <message>``, and what follows is
    Spark's SQLSTATE codes and its own description of the query."""
    lines = text.splitlines()
    assert f"cdc.errors.{name}: {message}" in lines[0], text[:3000]
    assert "Traceback" not in text, text[:3000]
    assert lines[1].strip().startswith("SQLSTATE: ") and \
        lines[2] == "=== Streaming Query ===", text[:3000]


@pytest.fixture
def errs_db(server):
    server.execute("CREATE DATABASE IF NOT EXISTS errs")
    server.execute("CREATE TABLE IF NOT EXISTS errs.t (id INT PRIMARY KEY)")
    server.execute("DROP USER IF EXISTS 'errs_nopriv'@'%'")
    server.execute("CREATE USER 'errs_nopriv'@'%' IDENTIFIED BY 'pw'")
    server.execute("GRANT SELECT ON errs.* TO 'errs_nopriv'@'%'")
    yield
    server.execute("DROP USER IF EXISTS 'errs_nopriv'@'%'")


@pytest.mark.parametrize("mistake", ["wrong password", "no privileges", "typo in includeTables"])
def test_a_stream_fails_with_the_message_on_its_first_line(spark, server, errs_db, tmp_path,
                                                           mistake):
    opts = options(server, **{"wrong password": {"password": "wrong"},
                              "no privileges": {"user": "errs_nopriv", "password": "pw"},
                              "typo in includeTables": {"includeTables": "errs.tt"}}[mistake])
    name, message = check_line(opts)
    shown_first(stream_failure(spark, opts, tmp_path), name, message)


def test_a_batch_read_fails_with_the_message_on_its_first_line(spark, server, errs_db):
    opts = options(server, password="wrong")
    opts.pop("startingPosition")
    name, message = check_line(opts)
    with pytest.raises(Exception) as e:
        spark.read.format("binlog-cdc").options(**opts).load().collect()
    text = str(e.value)
    assert f"cdc.errors.{name}: {message}" in text.splitlines()[0], text[:3000]
    assert "Traceback" not in text, text[:3000]


def test_an_option_typo_fails_with_the_message_on_its_first_line(spark, server):
    opts = options(server, hots="db1")
    with pytest.raises(ConfigurationError) as parsed:
        SourceOptions.parse(opts)
    with pytest.raises(AnalysisException) as e:
        spark.readStream.format("binlog-cdc").options(**opts).load()
    text = str(e.value)
    assert f"cdc.errors.ConfigurationError: {parsed.value}" in text.splitlines()[0], text[:3000]
    assert "did you mean host?" in text.splitlines()[0]
    assert "Traceback" not in text, text[:3000]


def test_a_sink_error_in_foreach_batch_comes_with_few_frames(spark, server, errs_db, tmp_path):
    """A DeltaUpserter refusing a table (no primary key) in ``foreachBatch``: Spark quotes the
    Python traceback of the function (Py4J formats it in the driver), which binlog-cdc cannot
    take out; only the frames between Spark's call and the binlog-cdc error are there (not the
    upserter's own), and the error line names what to do."""
    from streaming.sinks.delta import DeltaUpserter
    server.execute("CREATE TABLE IF NOT EXISTS errs.nokey (id INT, v INT)")
    opts = options(server, includeTables="errs.nokey",
                   startingPosition=",".join(map(str, server.current_position())).replace(
                       ",", ":"))
    server.execute("INSERT INTO errs.nokey VALUES (1, 1)")
    p = server.cdc_params()
    up = DeltaUpserter(tmp_path / "delta", host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="errs")
    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(up).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as e:
        q.awaitTermination(120)
    text = str(e.value).split("\n=== Streaming Query ===")[0]
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "cdc.errors.ConfigurationError: " in line)
    assert lines[at].endswith(
        "cdc.errors.ConfigurationError: DeltaUpserter: errs.nokey has no primary key; upserts "
        "need a primary key to match changes to rows (add one, or leave the table out with "
        "excludeTables)"), text
    frames = [line for line in lines[:at] if line.lstrip().startswith("File ")]
    assert not any("/streaming/sinks/delta/" in f for f in frames), text
    assert len(frames) <= 4, text     # Py4J's call, PySpark's (twice: it re-raises), spark_safe
