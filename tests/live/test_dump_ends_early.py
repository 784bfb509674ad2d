"""A Spark task reading a closed binlog file "to its end" whose dump ends early; and
``binlog-cdc tail --non-blocking`` whose dump ends before the end of the binlog.

A task's dump is non-blocking: the source ends it with an EOF packet at the end of the binlog
-- and also when it shuts down, wherever the dump is.  For a chunk that reads a file that is
not the last one up to its end (``to_file_end``), the EOF of a shutdown in the middle of the
file must not count as "the end of the file was reached": the rest of the file would be
skipped, its transactions lost.  (The chunk up to a transaction boundary is covered by
tests/live/test_hardening.py::test_a_task_whose_dump_ends_before_the_chunk_end_reads_on.)
"""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("pyspark")

from cdc.replica.client import ReplicaClient  # noqa: E402
from cdc.replica.config import ReplicaConfig  # noqa: E402
from streaming.source.options import SourceOptions  # noqa: E402
from support.fake_source import BinlogFile, EventBuilder, FakeSource, Table, parse_dump  # noqa: E402


class EndsEarlyOnce(FakeSource):
    """A MySQL 8.4 fake whose first dump ends (EOF, as at a shutdown) after its first *cut*
    events; later dumps are whole."""

    cut = 2 + 5 * 2 + 2                      # ROTATE, FDE, two transactions, half a third

    def _dump(self, sock, pkt, plan) -> None:
        if len(self.got.dumps) > 1:
            return super()._dump(sock, pkt, plan)
        _, stream = self._dump_stream(pkt)
        seq = 1
        for ev in stream[:self.cut]:
            seq = self._send(sock, seq, b"\x00" + ev)
        self._send(sock, seq, b"\xfe\x00\x00\x02\x00")


def _files(b, t, uuid, *, rotate: bool = True) -> list[BinlogFile]:
    """binlog.000001 (five transactions; closed by a ROTATE, or, rotate=False, by nothing: a
    server crash) and binlog.000002 (one transaction)."""
    one = BinlogFile.build("binlog.000001", [b.fde(), b.previous_gtids("")],
                           [(f"{uuid}:{g}", b.transaction(g, t, [(g, f"row {g}")], 100 + g))
                            for g in range(1, 6)],
                           rotate_to="binlog.000002" if rotate else None, builder=b)
    two = BinlogFile.build("binlog.000002", [b.fde(), b.previous_gtids(f"{uuid}:1-5")],
                           [(f"{uuid}:6", b.transaction(6, t, [(6, "row 6")], 106))])
    return [one, two]


def _reader(src):
    from streaming.contract.spark_schema import JSON_SCHEMA
    from streaming.source.stream_reader import BinlogStreamReader
    opts = SourceOptions.parse({"host": "127.0.0.1", "port": str(src.port), "user": src.user,
                                "password": src.password, "serverId": "500",
                                "maxRetries": "5"},
                               streaming=True)
    return BinlogStreamReader(opts, JSON_SCHEMA, None)


@pytest.mark.parametrize("rotate", [True, False], ids=["rotated", "crashed"])
def test_a_to_file_end_task_whose_dump_ends_mid_file_reads_on(caplog, rotate):
    from streaming.source.stream_reader import BinlogChunk

    b, t = EventBuilder(), Table()
    uuid = b.uuid
    one, two = _files(b, t, uuid, rotate=rotate)
    start = one.events()[2][0]                             # the first transaction
    with EndsEarlyOnce([one, two]) as src:
        reader = _reader(src)
        with caplog.at_level("WARNING", logger="binlog_cdc.spark"):
            txs = list(reader._chunk_transactions(
                BinlogChunk(0, "binlog.000001", start, one.size, True)))
        assert [tx.gtid for tx in txs] == [f"{uuid}:{g}" for g in range(1, 6)]   # each once
        assert [parse_dump(d)["pos"] for d in src.got.dumps] == [start, one.end_of(f"{uuid}:2")]
    assert any("before the planned end" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("rotate", [True, False], ids=["rotated", "crashed"])
def test_a_to_file_end_task_that_reads_the_whole_file_needs_one_dump(rotate):
    """The control: the end of a closed file is recognised whether it ends with a ROTATE or
    with nothing (the next file's transactions, or the end of the binlog, come after it)."""
    from streaming.source.stream_reader import BinlogChunk

    b, t = EventBuilder(), Table()
    uuid = b.uuid
    one, two = _files(b, t, uuid, rotate=rotate)
    start = one.events()[2][0]
    for files in ([one, two], [one, BinlogFile.build("binlog.000002", two.header, [])]):
        with FakeSource(files) as src:
            txs = list(_reader(src)._chunk_transactions(
                BinlogChunk(0, "binlog.000001", start, one.size, True)))
            assert [tx.gtid for tx in txs] == [f"{uuid}:{g}" for g in range(1, 6)]
            assert len(src.got.dumps) == 1


def _client(src, start) -> ReplicaClient:
    return ReplicaClient(ReplicaConfig("127.0.0.1", src.port, src.user, src.password,
                                       server_id=501), start=start, blocking=False)


def test_the_client_says_how_far_the_dump_read():
    """ReplicaClient.read_to: the file and end of the last event the dump delivered -- past
    the last transaction yielded when the dump ended inside a transaction."""
    b, t = EventBuilder(), Table()
    uuid = b.uuid
    one, two = _files(b, t, uuid)
    start = f"binlog.000001:{one.events()[2][0]}"
    with FakeSource([one, two]) as src:
        client = _client(src, start)
        try:
            seen = [(tx.gtid, client.read_to) for tx in client.transactions()]
        finally:
            client.close()
    assert seen[0] == (f"{uuid}:1", ("binlog.000001", one.end_of(f"{uuid}:1")))
    assert seen[4] == (f"{uuid}:5", ("binlog.000001", one.end_of(f"{uuid}:5")))
    assert seen[5] == (f"{uuid}:6", ("binlog.000002", two.end_of(f"{uuid}:6")))
    assert client.read_to == ("binlog.000002", two.size)
    with EndsEarlyOnce([one, two]) as src:
        client = _client(src, start)
        try:
            assert [tx.gtid for tx in client.transactions()] == [f"{uuid}:1", f"{uuid}:2"]
        finally:
            client.close()
    third = [off for off, _, g in one.events() if g == f"{uuid}:3"]
    # the dump stopped after the third transaction's first two events (GTID, QUERY BEGIN)
    assert client.position.pos == one.end_of(f"{uuid}:2") == third[0]
    assert client.read_to == ("binlog.000001", third[2])


# --- binlog-cdc tail --non-blocking --------------------------------------------------------------


class EndsAtAlways(FakeSource):
    """Every dump ends (EOF) at the same place in binlog.000001: a source that
    keeps shutting down there (*stop_at*: that offset)."""

    stop_at = 0

    def _dump(self, sock, pkt, plan) -> None:
        _, stream = self._dump_stream(pkt)
        seq = 1
        for ev in stream:
            log_pos = int.from_bytes(ev[13:17], "little")
            if log_pos > self.stop_at:
                break
            seq = self._send(sock, seq, b"\x00" + ev)
        self._send(sock, seq, b"\xfe\x00\x00\x02\x00")


def _tail(src, start: int, monkeypatch, capsys, *extra) -> tuple[int, list[str], str]:
    import json

    from cdc.cli.main import main
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", src.password)
    rc = main(["tail", "--host", "127.0.0.1", "--port", str(src.port), "--user", src.user,
               "--server-id", "502", "--non-blocking", "--format", "jsonl",
               "--file", "binlog.000001", "--pos", str(start), *extra])
    out, err = capsys.readouterr()
    return rc, [json.loads(line)["gtid"] for line in out.splitlines()], err


def test_tail_non_blocking_reads_on_when_the_dump_ends_before_the_binlog_end(monkeypatch,
                                                                           capsys):
    """A source that shuts down ends a non-blocking dump with the EOF of the binlog's end:
    ``tail --non-blocking`` went on as if it had reached the end (exit 0, three transactions
    of six missing). It reads to the binlog end it started with, reconnecting as needed."""
    b, t = EventBuilder(), Table()
    one, two = _files(b, t, b.uuid)
    start = one.events()[2][0]
    with EndsEarlyOnce([one, two]) as src:
        rc, gtids, err = _tail(src, start, monkeypatch, capsys)
        assert rc == 0, err
        assert gtids == [f"{b.uuid}:{g}" for g in range(1, 7)]            # each once
        assert [parse_dump(d)["pos"] for d in src.got.dumps] == [start, one.end_of(f"{b.uuid}:2")]
    assert "before the end of the binlog" in err


def test_tail_non_blocking_fails_when_the_dump_keeps_ending_early(monkeypatch, capsys):
    b, t = EventBuilder(), Table()
    one, two = _files(b, t, b.uuid)
    start = one.events()[2][0]
    with EndsAtAlways([one, two]) as src:
        src.stop_at = one.end_of(f"{b.uuid}:2")
        rc, gtids, err = _tail(src, start, monkeypatch, capsys, "--max-retries", "3")
        assert len(src.got.dumps) == 3
    assert rc == 2
    assert "binlog-cdc: error:" in err and "Traceback" not in err
    assert "before the end of the binlog" in err and "3 times in a row" in err
    # what was read is printed once, and the resume point is right after it
    assert gtids == [f"{b.uuid}:1", f"{b.uuid}:2"]
    assert f"--pos {one.end_of(f'{b.uuid}:2')}" in err


def test_tail_non_blocking_to_an_unreachable_server_says_what_the_client_says(monkeypatch,
                                                                            capsys):
    """Asking the binlog end first must not replace the client's own first-connection error
    (the attempts, "check the host and port") by a bare "connection lost"."""
    from cdc.cli.main import main
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", "x")
    rc = main(["tail", "--host", "127.0.0.1", "--port", str(port), "--user", "cdc",
               "--non-blocking", "--connect-timeout", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "cannot connect to 127.0.0.1" in err and "check the host and port" in err
