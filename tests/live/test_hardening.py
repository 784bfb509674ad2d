"""Operations hardening (issue 13) against real servers: a Spark query rides out a restart of its
source, a purged start file with failOnDataLoss=false starts at the oldest file, and a man in
the middle with an untrusted certificate never receives the password (replica client, the Spark
driver's SQL session, the DeltaUpserter) under sslMode=verify_ca / verify_identity."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("pyspark")

from cdc.errors import AuthenticationError, ConfigurationError  # noqa: E402
from cdc.replica.client import ReplicaClient  # noqa: E402
from cdc.replica.config import ReplicaConfig, SslOptions  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402
from streaming.source.driver import Driver  # noqa: E402
from streaming.source.options import SourceOptions  # noqa: E402

from support.fake_source import (BinlogFile, EventBuilder, FakeSource, Table,  # noqa: E402
                                 parse_dump)
from support.mitm import Mitm  # noqa: E402
from support.tls import make_cert, make_tls_files  # noqa: E402

PASSWORD = "Mitm-Must-Not-See-This-0"


# --- a man in the middle never gets the password ------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """``trusted``: the CA the clients trust; ``self_signed``: a MITM certificate of another CA;
    ``wrong_name``: a certificate the trusted CA signed for another host."""
    base = tmp_path_factory.mktemp("pki")
    trusted = make_cert(base / "trusted", ["evil.example"], ca_name="trusted CA")
    return {"trusted_ca": trusted["ca"], "wrong_name": trusted,
            "self_signed": make_tls_files(base)}


def replica_client_login(port, mode, ca):
    config = ReplicaConfig("127.0.0.1", port, "cdc", PASSWORD, server_id=77, connect_timeout=2,
                           ssl=SslOptions.from_mode(mode, ca=ca))
    client = ReplicaClient(config, start="latest", blocking=False)
    try:
        list(client.transactions())
    finally:
        client.close()


def driver_login(port, mode, ca):
    opts = SourceOptions.parse({"host": "127.0.0.1", "port": str(port), "user": "cdc",
                                "password": PASSWORD, "sslMode": mode, "sslCa": ca,
                                "connectTimeoutMs": "2000", "maxRetries": "1"}, streaming=True)
    d = Driver(opts)
    try:
        d.query("SELECT 1")
    finally:
        d.close()


def delta_login(port, mode, ca, tmp_path):
    config = ReplicaConfig("127.0.0.1", port, "cdc", PASSWORD, connect_timeout=2,
                           ssl=SslOptions.from_mode(mode, ca=ca))
    up = DeltaUpserter(str(tmp_path / "delta"), app_id="mitm", config=config)
    up.columns("shop", "items")


LOGINS = {"replica client": replica_client_login, "Spark driver SQL": driver_login,
          "DeltaUpserter": delta_login}


@pytest.mark.parametrize("who", list(LOGINS))
@pytest.mark.parametrize("mode, cert", [("verify_ca", "self_signed"),
                                        ("verify_identity", "self_signed"),
                                        ("verify_identity", "wrong_name")])
def test_a_man_in_the_middle_gets_no_password(pki, tmp_path, who, mode, cert):
    login = LOGINS[who]
    args = (tmp_path,) if who == "DeltaUpserter" else ()
    with Mitm(pki[cert]["cert"], pki[cert]["key"]) as mitm:
        with pytest.raises(ConfigurationError, match="TLS handshake with 127.0.0.1:.* failed"):
            login(mitm.port, mode, pki["trusted_ca"], *args)
        time.sleep(0.2)
    assert mitm.connections >= 1 and mitm.tls_refused == mitm.connections
    assert mitm.received == []                       # not even the handshake response
    assert PASSWORD.encode() not in mitm.all_bytes()


@pytest.mark.parametrize("who", list(LOGINS))
@pytest.mark.parametrize("mode, cert", [("required", "self_signed"), ("verify_ca", "wrong_name")])
def test_weaker_modes_do_give_the_password_away(pki, tmp_path, who, mode, cert):
    """The control: what the test above guards against really happens without verification
    (required) or without the host-name check (verify_ca with a certificate for another host)."""
    login = LOGINS[who]
    args = (tmp_path,) if who == "DeltaUpserter" else ()
    with Mitm(pki[cert]["cert"], pki[cert]["key"]) as mitm:
        with pytest.raises(AuthenticationError):
            login(mitm.port, mode, pki["trusted_ca"], *args)
    assert PASSWORD.encode() + b"\0" in mitm.received     # the clear-text full-auth answer


# --- a task whose dump ends early reads on -----------------------------------------------------------


class EndsEarlyOnce(FakeSource):
    """A MySQL 8.4 fake whose first dump ends (EOF, as at a shutdown) in the middle of the third
    transaction; later dumps are whole."""

    def _dump(self, sock, pkt, plan) -> None:
        if len(self.got.dumps) > 1:
            return super()._dump(sock, pkt, plan)
        _, stream = self._dump_stream(pkt)
        seq = 1
        for ev in stream[:2 + 5 * 2 + 2]:      # ROTATE, FDE, two transactions, half a third
            seq = self._send(sock, seq, b"\x00" + ev)
        self._send(sock, seq, b"\xfe\x00\x00\x02\x00")


def test_a_task_whose_dump_ends_before_the_chunk_end_reads_on(caplog):
    from streaming.contract.spark_schema import JSON_SCHEMA
    from streaming.source.stream_reader import BinlogChunk, BinlogStreamReader

    b, t = EventBuilder(), Table()
    uuid = b.uuid
    f = BinlogFile.build("binlog.000001", [b.fde(), b.previous_gtids("")],
                         [(f"{uuid}:{g}", b.transaction(g, t, [(g, f"row {g}")], 100 + g))
                          for g in range(1, 6)])
    start = f.events()[2][0]                               # the first transaction
    end = f.end_of(f"{uuid}:5")
    with EndsEarlyOnce(f) as src:
        opts = SourceOptions.parse({"host": "127.0.0.1", "port": str(src.port),
                                    "user": src.user, "password": src.password,
                                    "serverId": "500"}, streaming=True)
        reader = BinlogStreamReader(opts, JSON_SCHEMA, None)
        with caplog.at_level("WARNING", logger="binlog_cdc.spark"):
            txs = list(reader._chunk_transactions(BinlogChunk(0, "binlog.000001", start, end,
                                                              False)))
        assert [tx.gtid for tx in txs] == [f"{uuid}:{g}" for g in range(1, 6)]   # each once
        assert [parse_dump(d)["pos"] for d in src.got.dumps] == [start, f.end_of(f"{uuid}:2")]
    assert any("before the planned end" in r.getMessage() for r in caplog.records)


# --- a private server: restarts, purges ------------------------------------------------------------


def stream(spark, options: dict):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def options(server, db, start, **extra) -> dict:
    p = server.cdc_params()
    opts = {"host": p["host"], "port": p["port"], "user": p["user"], "password": p["password"],
            "includeTables": f"{db}.*", "heartbeatIntervalMs": 1000,
            "startingPosition": json.dumps({"file": start[0], "pos": start[1]})}
    opts.update(extra)
    return opts


def rows_of(spark, name: str) -> list:
    return spark.sql(f"SELECT op, before, after, seq FROM {name}").collect()


def state_of(rows) -> dict:
    """Row changes applied in seq order: {id: after image}."""
    state: dict = {}
    for r in sorted(rows, key=lambda r: r.seq):
        if r.op in ("c", "u"):
            after = json.loads(r.after)
            if r.op == "u":
                state.pop(json.loads(r.before)["id"])
            assert r.op == "u" or after["id"] not in state, f"duplicate insert: {r}"
            state[after["id"]] = after
        else:
            state.pop(json.loads(r.before)["id"])
    return state


@pytest.mark.slow
def test_a_spark_query_survives_a_5_s_restart_of_its_source(spark, mariadb_factory, tmp_path):
    server = mariadb_factory()
    db = "restart_db"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    start = server.current_position()
    q = (stream(spark, options(server, db, start)).writeStream.format("memory")
         .queryName("restarted").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        for i in range(1, 51):
            server.execute(f"INSERT INTO {db}.t VALUES ({i}, {i})")
        deadline = time.monotonic() + 60
        while len(rows_of(spark, "restarted")) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        port = server.port
        server.stop()                   # the source is away for 5 s (the driver keeps polling)
        time.sleep(5)
        server.start()
        assert server.port == port
        assert q.isActive, q.exception()
        for i in range(51, 101):
            server.execute(f"INSERT INTO {db}.t VALUES ({i}, {i})")
        server.execute(f"UPDATE {db}.t SET v = v * 10 WHERE id % 7 = 0")
        server.execute(f"DELETE FROM {db}.t WHERE id % 11 = 0")
        want = {r[0]: {"id": r[0], "v": r[1]}
                for r in server.execute(f"SELECT id, v FROM {db}.t ORDER BY id")}
        deadline = time.monotonic() + 120
        got = None
        while time.monotonic() < deadline and q.isActive:
            got = state_of(rows_of(spark, "restarted"))
            if got == want:
                break
            time.sleep(0.5)
        assert q.exception() is None, q.exception()
        assert q.isActive
        assert got == want
        assert len(rows_of(spark, "restarted")) == 100 + 14 + 9     # each change once
    finally:
        q.stop()


@pytest.mark.slow
def test_a_purged_start_file_with_fail_on_data_loss_false_starts_at_the_oldest(
        spark, mariadb_factory, tmp_path, caplog):
    server = mariadb_factory()
    db = "purged_db"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    first = server.current_position()
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1)")           # lost with its file
    server.flush_binary_logs()
    server.execute(f"INSERT INTO {db}.t VALUES (2, 2)")
    server.flush_binary_logs()
    oldest = server.current_position()[0]
    deadline = time.monotonic() + 20
    while True:  # a file is kept until the binlog checkpoint has passed it
        server.execute(f"PURGE BINARY LOGS TO '{oldest}'")
        if server.binlog_files()[0].name == oldest or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    server.execute(f"INSERT INTO {db}.t VALUES (3, 3)")
    server.execute(f"UPDATE {db}.t SET v = 30 WHERE id = 3")
    logs = [r[0] for r in server.execute("SHOW BINARY LOGS")]
    assert first[0] not in logs and logs[0] == oldest

    # failOnDataLoss=true (default): the query stops, naming the option that skips the gap
    opts = options(server, db, first)
    q = (stream(spark, opts).writeStream.format("memory").queryName("purged_strict")
         .option("checkpointLocation", str(tmp_path / "strict")).trigger(availableNow=True)
         .start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(120)
    assert "BinlogPurgedError" in str(e.value) and "failOnDataLoss=false" in str(e.value)

    # false: a warning, and the stream starts at the oldest file the server has
    q = (stream(spark, {**opts, "failOnDataLoss": "false"}).writeStream.format("memory")
         .queryName("purged_lenient").option("checkpointLocation", str(tmp_path / "lenient"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    rows = sorted(rows_of(spark, "purged_lenient"), key=lambda r: r.seq)
    assert [(r.op, json.loads(r.after)) for r in rows] == [
        ("c", {"id": 3, "v": 3}), ("u", {"id": 3, "v": 30})]
    assert server.execute(f"SELECT id, v FROM {db}.t WHERE id = 3") == [(3, 30)]
