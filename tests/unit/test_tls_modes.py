"""Operations hardening without a server (issue 13): sslMode mapped in one place for the CLI and
Spark, the authentication hint in the caller's terms, the packet size cap, stream positions in
parse errors, a first connection that never succeeds, and the install hints."""

from __future__ import annotations

import argparse
import re
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.fake_source import BinlogFile, EventBuilder, FakeSource, event
from support.processes import closed_port

from cdc.binlog.constants import ChecksumAlg
from cdc.binlog.parser import BinlogParser
from cdc.cli.args import add_connection_arguments, config_from_args
from cdc.cli.lag import PLOT_HINT
from cdc.errors import (AuthenticationError, ChecksumError, ConfigurationError,
                        PacketTooLargeError, ParseError, ProtocolError, ServerConnectionError,
                        TransientServerError, is_transient, map_server_error)
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import SSL_MODES, ReplicaConfig, RetryPolicy, SslOptions
from cdc.replica.packets import MAX_PAYLOAD, PacketReader
from cdc.replica.sql import SqlSession, mysql_error
from streaming.source.options import SourceOptions

ROOT = Path(__file__).resolve().parents[2]
BASE = {"host": "db1", "user": "cdc", "password": "s3cret"}


# --- sslMode: one mapping, CLI and Spark alike ------------------------------------------------------

EXPECTED = {
    "disabled": False,
    "preferred": None,
    "required": SslOptions(ca="/ca.pem", verify=False),
    "verify_ca": SslOptions(ca="/ca.pem", verify=True),
    "verify_identity": SslOptions(ca="/ca.pem", verify=True, verify_identity=True),
}


def cli_config(*argv: str) -> ReplicaConfig:
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    args = p.parse_args(["--host", "db1", *argv])
    return config_from_args(args, heartbeat_interval=None, retry=RetryPolicy())


@pytest.mark.parametrize("mode", SSL_MODES)
def test_ssl_mode_means_the_same_in_the_cli_and_in_spark(mode):
    ca = [] if mode in ("disabled", "preferred") else ["--ssl-ca", "/ca.pem"]
    spark_ca = {} if mode in ("disabled", "preferred") else {"sslCa": "/ca.pem"}
    want = EXPECTED[mode]
    assert cli_config("--ssl-mode", mode, *ca).ssl == want
    assert cli_config("--ssl-mode", mode.upper(), *ca).ssl == want
    assert SourceOptions.parse({**BASE, "sslMode": mode, **spark_ca}).replica_config().ssl == want
    assert SslOptions.from_mode(mode, ca=None if not ca else "/ca.pem") == want
    assert ReplicaConfig("db1", ssl=mode).ssl == SslOptions.from_mode(mode)


def test_ssl_mode_contexts_verify_what_they_promise():
    """The ssl.SSLContext each mode hands to PyMySQL; verify_* without a CA: system CAs."""
    assert SslOptions.from_mode("required").context().verify_mode == ssl.CERT_NONE
    ctx = SslOptions.from_mode("verify_ca").context()
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, False)
    ctx = SslOptions.from_mode("verify_identity").context()
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)
    # no CA given: the system's trust store is loaded (the same CAs as a default context)
    system = ssl.create_default_context().cert_store_stats()
    assert ctx.cert_store_stats() == system


def test_old_tls_flags_keep_working():
    assert cli_config().ssl is None                                   # preferred
    assert cli_config("--ssl").ssl == SslOptions()                    # required, unverified
    assert SslOptions().context().verify_mode == ssl.CERT_NONE
    assert cli_config("--ssl-ca", "/ca.pem").ssl == SslOptions(ca="/ca.pem")  # verified (a CA)
    assert cli_config("--ssl-ca", "/ca.pem", "--no-ssl-verify").ssl.verify is False
    # --ssl-verify-identity alone used to be ignored; it now verifies (system CAs)
    assert cli_config("--ssl-verify-identity").ssl == SslOptions(verify=True,
                                                                  verify_identity=True)
    o = SourceOptions.parse({**BASE, "sslCa": "/ca.pem", "sslVerify": "true"})
    assert o.replica_config().ssl == SslOptions(ca="/ca.pem", verify=True)


@pytest.mark.parametrize("build, message", [
    (lambda: cli_config("--ssl-mode", "verify_ca", "--ssl"),
     "--ssl-mode replaces --ssl: give only --ssl-mode"),
    (lambda: cli_config("--ssl-mode", "disabled", "--ssl-ca", "/ca.pem"),
     "--ssl-mode=disabled turns TLS off, but TLS files were given"),
    (lambda: SourceOptions.parse({**BASE, "sslMode": "verify-full"}),
     "sslMode must be one of disabled, preferred, required, verify_ca, verify_identity, not "
     "'verify-full'"),
    (lambda: SourceOptions.parse({**BASE, "sslMode": "required", "sslVerify": "true"}),
     "options sslMode and sslVerify exclude each other"),
])
def test_ssl_mode_mistakes_are_configuration_errors(build, message):
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        build()


def test_an_unknown_cli_ssl_mode_is_refused_by_argparse(capsys):
    from cdc.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["tail", "--host", "db1", "--ssl-mode", "verify-full"])
    assert e.value.code == 2
    assert "invalid choice: 'verify-full'" in capsys.readouterr().err


# --- the authentication hint in the caller's terms ------------------------------------------------


def test_the_authentication_hint_names_the_spark_options_in_spark():
    import pymysql
    denied = pymysql.err.OperationalError(1045, "Access denied for user 'cdc'@'10.0.0.7' "
                                                "(using password: YES)")
    spark = mysql_error(denied, SourceOptions.parse(BASE).replica_config())
    assert isinstance(spark, AuthenticationError)
    assert "check the password (the Spark options password or passwordFile, or " \
           "BINLOG_CDC_PASSWORD in the driver's and executors' environment)" in str(spark)
    assert "--password" not in str(spark)
    cli = mysql_error(denied, cli_config())
    assert "check the password (--password, --password-file or BINLOG_CDC_PASSWORD)" in str(cli)
    assert "check the password (--password" in str(map_server_error(1045, "denied"))


# --- the packet size cap ---------------------------------------------------------------------------


class EndlessContinuations:
    """A socket of a server that sends 0xFFFFFF-byte continuation packets forever."""

    def __init__(self):
        self.seq = 0
        self.sent = 0
        self.chunk = b"\xab" * (1 << 20)
        self.left = 0

    def recv(self, n: int) -> bytes:
        if self.left == 0:
            self.left = MAX_PAYLOAD
            head = MAX_PAYLOAD.to_bytes(3, "little") + bytes((self.seq & 0xFF,))
            self.seq += 1
            self.sent += 4
            return head
        out = self.chunk[:min(n, self.left)]
        self.left -= len(out)
        self.sent += len(out)
        return out


def test_endless_continuation_packets_are_a_protocol_error_not_memory_exhaustion():
    sock = EndlessContinuations()
    reader = PacketReader(sock, seq=0, recv_size=1 << 20, max_payload=40 << 20)
    with pytest.raises(ProtocolError, match=r"more than 41943040 bytes .*max_packet_size") \
            as excinfo:
        reader.read_payload()
    assert sock.sent < 60 << 20           # stopped at the cap, not at MemoryError
    assert isinstance(excinfo.value, PacketTooLargeError) and not is_transient(excinfo.value)
    # the default cap is MySQL's largest max_allowed_packet, configurable on the config
    assert PacketReader(sock).max_payload == 1 << 30
    assert ReplicaConfig("db1").max_packet_size == 1 << 30
    assert ReplicaConfig("db1", max_packet_size=64 << 20).max_packet_size == 64 << 20
    with pytest.raises(ConfigurationError, match="max_packet_size"):
        ReplicaConfig("db1", max_packet_size=0)


def test_a_payload_of_exactly_the_cap_still_reassembles():
    payload = bytes(range(256)) * ((MAX_PAYLOAD + 10) // 256 + 1)
    payload = payload[:MAX_PAYLOAD + 10]
    wire = (MAX_PAYLOAD.to_bytes(3, "little") + b"\x00" + payload[:MAX_PAYLOAD]
            + (10).to_bytes(3, "little") + b"\x01" + payload[MAX_PAYLOAD:])

    class Once:
        def __init__(self):
            self.data = wire

        def recv(self, n):
            out, self.data = self.data[:n], self.data[n:]
            return out
    assert PacketReader(Once(), seq=0, max_payload=len(payload)).read_payload() == payload


# --- parse errors on a stream carry the stream position -----------------------------------------


def stream_parser() -> BinlogParser:
    b = EventBuilder()
    p = BinlogParser(stream=True, checksum=ChecksumAlg.CRC32)   # as the client negotiates
    p.feed_event(b.rotate("mysql-bin.000007", 4))       # the dump's artificial rotate
    p.feed_event(b.fde())
    return p


def test_a_checksum_error_on_a_stream_names_file_and_position():
    p = stream_parser()
    ev = bytearray(EventBuilder().query("BEGIN", "shop"))
    ev[13:17] = struct.pack("<I", 1000)                   # log_pos: the end of the event
    ev[-1] ^= 0xFF                                         # a corrupt CRC32
    with pytest.raises(ChecksumError) as e:
        p.feed_event(bytes(ev))
    assert (e.value.file, e.value.position) == ("mysql-bin.000007", 1000 - len(ev))
    assert f"(at file mysql-bin.000007, position {1000 - len(ev)})" in str(e.value)
    assert "None" not in str(e.value)


def test_a_malformed_event_on_a_stream_names_file_and_position():
    p = stream_parser()
    # a QUERY event whose body is shorter than its post-header (valid CRC32)
    raw = event(2, b"\x07\x00", log_pos=5000)
    with pytest.raises(ParseError) as e:
        p.feed_event(raw)
    assert (e.value.file, e.value.position) == ("mysql-bin.000007", 5000 - len(raw))
    assert "position None" not in str(e.value)


# --- a first connection that never succeeds ------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["tail", "--connect-timeout", "1.5"],
    ["lag", "--duration", "2", "--format", "jsonl"],
    ["lag", "--connect-timeout", "1.5", "--format", "jsonl"],
])
def test_tail_and_lag_exit_2_when_they_cannot_connect(command):
    port = closed_port()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "cdc", command[0], "--host", "127.0.0.1",
                        "--port", str(port), "--user", "cdc", *command[1:]],
                       capture_output=True, text=True, timeout=30, cwd=ROOT)
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"binlog-cdc: error: cannot connect to 127.0.0.1:{port}: ")
    assert "Connection refused" in last and "lost" not in last
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    assert took < 8, took                                 # not 10 s, not forever


# --- install hints ----------------------------------------------------------------------------------


def test_the_plot_hint_says_what_works_from_a_checkout():
    assert "binlog-cdc[plot]" not in PLOT_HINT.replace(".[plot]", "")
    assert "pip install matplotlib" in PLOT_HINT and "pip install -e '.[plot]'" in PLOT_HINT


def test_python_3_10_gets_tomli_for_the_job_config():
    text = (ROOT / "pyproject.toml").read_text()
    assert "\"tomli>=2; python_version < '3.11'\"" in text
    src = (ROOT / "streaming/apps/job.py").read_text()
    assert "import tomli as tomllib" in src


class HugePayloadSource(FakeSource):
    """A fake MySQL 8.4 that answers the binlog dump with endless continuation packets."""

    def _dump(self, sock, pkt, plan) -> None:
        chunk = b"\x00" * MAX_PAYLOAD
        seq = 1
        try:
            while not self._stop.is_set():
                sock.sendall(MAX_PAYLOAD.to_bytes(3, "little") + bytes((seq & 0xFF,)) + chunk)
                seq += 1
        except OSError:
            pass


def test_the_replica_client_stops_at_the_cap_and_does_not_reconnect():
    b = EventBuilder()
    f = BinlogFile.build("binlog.000001", [b.fde(), b.previous_gtids("")], [])
    with HugePayloadSource(f) as src:
        config = ReplicaConfig("127.0.0.1", src.port, src.user, src.password, server_id=99,
                               max_packet_size=40 << 20, retry=RetryPolicy(max_attempts=5))
        client = ReplicaClient(config, start=Start.at("binlog.000001", 4))
        with pytest.raises(PacketTooLargeError, match="more than 41943040 bytes"):
            list(client.transactions())
        assert len(src.got.dumps) == 1                     # not retried: it would come again


# --- the driver's SQL session rides out an outage ---------------------------------------------------


def test_a_sql_session_with_a_policy_retries_with_backoff_and_logs(caplog):
    import pymysql
    attempts = []
    outage_until = time.monotonic() + 1.0

    def connect():
        attempts.append(time.monotonic())
        if time.monotonic() < outage_until:
            raise TransientServerError("connection to the server (db1:3306) lost: server error "
                                       "2003: Can't connect", 2003)
        return "conn"

    policy = RetryPolicy(max_attempts=20, max_time=10, initial_backoff=0.05, max_backoff=0.3,
                         jitter=0.01)
    session = SqlSession(connect, retry=policy, where="cdc@db1:3306")
    with caplog.at_level("WARNING", logger="cdc.replica"):
        assert session.run(lambda conn: conn + " ok") == "conn ok"
    assert len(attempts) >= 3
    assert attempts[-1] - attempts[0] >= 1.0              # backed off across the outage
    retries = [r.getMessage() for r in caplog.records]
    assert len(retries) == len(attempts) - 1
    assert retries[0].startswith("SQL connection to cdc@db1:3306 failed (attempt 1: ")

    # the legacy session (one immediate retry) is what failed the Spark query
    attempts.clear()
    outage_until = time.monotonic() + 1.0
    with pytest.raises(TransientServerError):
        SqlSession(connect).run(lambda conn: conn)

    # a lost connection in the middle of a query is retried on a new one; a budget that runs
    # out is a ServerConnectionError saying so; other errors are not retried
    calls = []

    def flaky(conn):
        calls.append(conn)
        if len(calls) < 3:
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        return len(calls)
    assert SqlSession(lambda: "c", retry=policy).run(flaky) == 3
    short = RetryPolicy(max_attempts=3, max_time=5, initial_backoff=0.01, max_backoff=0.02)
    with pytest.raises(ServerConnectionError, match="cdc@db1:3306 stayed unreachable: 3 attempts"):
        SqlSession(lambda: (_ for _ in ()).throw(
            pymysql.err.OperationalError(2003, "Can't connect")), retry=short,
            where="cdc@db1:3306").run(lambda c: c)
    with pytest.raises(pymysql.err.ProgrammingError):
        SqlSession(lambda: "c", retry=policy).run(lambda c: (_ for _ in ()).throw(
            pymysql.err.ProgrammingError(1064, "syntax")))
