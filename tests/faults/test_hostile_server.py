"""A hostile (or broken) server: a fake MySQL 8.4 source (tests/support/fake_source.py) that
serves a few good transactions, then something no real server sends -- endless 16 MiB
continuation packets, one packet over the client's cap, a TABLE_MAP claiming an absurd number
of columns, a rows event for a table id no TABLE_MAP announced. The client must deliver the good
transactions exactly once, then stop with the exact error -- promptly, without unbounded memory,
and without reconnecting (the same bytes would come again)."""

from __future__ import annotations

import struct
import time

import pytest

from cdc.errors import PacketTooLargeError, ParseError, SchemaError, TruncatedEventError
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy
from cdc.replica.packets import MAX_PAYLOAD
from faultkit import Figures, fault_time_bound  # noqa: F401 (autouse fixture)
from support.fake_source import (STMT_END_F, TABLE_MAP, WRITE_ROWS_V2, BinlogFile, EventBuilder,
                                 FakeSource, Table, lenenc)

B = EventBuilder()
T = Table()
GOOD = {1: [(1, "apple"), (2, None)], 2: [(3, "pear")], 3: [(4, "kiwi ü"), (5, "fig")]}
RETRY = RetryPolicy(max_attempts=5, max_time=20, initial_backoff=0.05, max_backoff=0.2,
                    jitter=0.0)


def binlog_with(*hostile_transactions) -> BinlogFile:
    """binlog.000001: the GOOD transactions (GTIDs :1-3), then *hostile_transactions* (lists of
    events, GTIDs :4...)."""
    txs = [(f"{B.uuid}:{g}", B.transaction(g, T, rows, 100 + g)) for g, rows in GOOD.items()]
    for i, events in enumerate(hostile_transactions, start=len(GOOD) + 1):
        txs.append((f"{B.uuid}:{i}", events))
    return BinlogFile.build("binlog.000001", [B.fde(), B.previous_gtids("")], txs)


def hostile_tx(gno: int, *events: bytes) -> list[bytes]:
    return [B.gtid(gno), B.query("BEGIN"), *events, B.xid(100 + gno)]


def table_map(column_count: int, types: bytes, table_id: int = T.table_id) -> bytes:
    """A TABLE_MAP of shop.items claiming *column_count* columns, with the type bytes *types*
    (LONG columns: no metadata), all nullable, and their names (optional metadata
    COLUMN_NAME: nothing for the client to ask information_schema)."""
    s, n = T.schema.encode(), T.name.encode()
    ntypes = len(types)
    names = b"".join(lenenc(len(c)) + c for c in (f"c{i}".encode() for i in range(ntypes)))
    body = (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes((len(s),)) + s + b"\0"
            + bytes((len(n),)) + n + b"\0" + lenenc(column_count) + types + lenenc(0)
            + b"\xff" * ((ntypes + 7) // 8) + b"\x04" + lenenc(len(names)) + names)
    return B.ev(TABLE_MAP, body)


def write_rows(table_id: int, rows) -> bytes:
    data = b"".join(B._image(r) for r in rows)
    body = (table_id.to_bytes(6, "little") + struct.pack("<HH", STMT_END_F, 2) + lenenc(2)
            + b"\x03" + data)
    return B.ev(WRITE_ROWS_V2, body)


def stream_until_error(src: FakeSource, **config):
    """Stream from the fake until the error; returns (changes received, the error, seconds)."""
    client = ReplicaClient(ReplicaConfig("127.0.0.1", src.port, src.user, src.password,
                                         server_id=4242, retry=RETRY, connect_timeout=5,
                                         **config),
                           start=Start.at("binlog.000001", 4), blocking=False)
    got = []
    t0 = time.monotonic()
    try:
        for tx in client.transactions():
            got += [(c.op, c.after) for c in tx.changes()]
    except Exception as e:  # noqa: BLE001 - the error is the result
        return got, e, time.monotonic() - t0, client
    finally:
        client.close()
    return got, None, time.monotonic() - t0, client


def check(name: str, src: FakeSource, got, error, seconds, client, **extra) -> Figures:
    """The good transactions arrived exactly once, from one connection (no retry)."""
    want = [("c", r) for rows in GOOD.values() for r in rows]
    figures = Figures(f"hostile-{name}", faults=1, written=len(want), received=len(got),
                      lost=len([w for w in want if w not in got]),
                      duplicated=len(got) - len(set(got)) + len([g for g in got if g not in want]))
    figures.extra.update(error=type(error).__name__, error_after_s=f"{seconds:.2f}", **extra)
    figures.report()
    assert got == want
    assert src.connections == 1 and len(src.got.dumps) == 1 and client.reconnects == 0
    return figures


def too_large(cap: int) -> str:
    return (f"the server is sending a payload of more than {cap} bytes (the client's "
            f"max_packet_size): a broken or hostile server, or an event larger than that (raise "
            f"ReplicaConfig.max_packet_size to accept it)")


class EndlessPacketSource(FakeSource):
    """After the binlog's events: 16 MiB continuation packets, for ever."""

    sent = 0

    def _dump(self, sock, pkt, plan) -> None:
        _, stream = self._dump_stream(pkt)
        seq = 1
        for ev in stream:
            seq = self._send(sock, seq, b"\x00" + ev)
        chunk = b"\x00" * MAX_PAYLOAD
        try:
            while not self._stop.is_set():
                sock.sendall(MAX_PAYLOAD.to_bytes(3, "little") + bytes((seq & 0xFF,)) + chunk)
                self.sent += MAX_PAYLOAD + 4
                seq += 1
        except OSError:
            pass


@pytest.mark.fault(timeout=60)
def test_endless_continuation_packets_stop_at_the_cap():
    cap = 32 << 20
    with EndlessPacketSource(binlog_with()) as src:
        got, error, seconds, client = stream_until_error(src, max_packet_size=cap)
        sent = src.sent
    check("endless-packets", src, got, error, seconds, client, cap=cap,
          sent_mib=sent >> 20)
    assert isinstance(error, PacketTooLargeError) and str(error) == too_large(cap)
    assert seconds < 20
    # the client read no further than the cap (plus what was in flight), then hung up
    assert sent < cap + 3 * MAX_PAYLOAD + (16 << 20)


@pytest.mark.fault(timeout=60)
def test_one_packet_over_the_cap_is_refused():
    """A single 1.4 MB event (one packet, no continuation) with max_packet_size 1 MiB."""
    cap = 1 << 20
    big = [(i, "x" * 30) for i in range(10, 40_010)]
    with FakeSource(binlog_with(B.transaction(4, T, big, 104))) as src:
        got, error, seconds, client = stream_until_error(src, max_packet_size=cap)
    check("packet-over-cap", src, got, error, seconds, client, cap=cap)
    assert isinstance(error, PacketTooLargeError) and str(error) == too_large(cap)


@pytest.mark.fault(timeout=60)
def test_table_map_claiming_2_pow_62_columns_is_a_parse_error():
    """A column count of 2**62 in a 60-byte event: refused at once, nothing allocated for it."""
    tm = table_map(1 << 62, b"\x03\x0f")
    binlog = binlog_with(hostile_tx(4, tm, write_rows(T.table_id, [(6, "x")])))
    pos = [off for off, ev, _ in binlog.events() if ev[4] == TABLE_MAP][-1]
    with FakeSource(binlog) as src:
        got, error, seconds, client = stream_until_error(src)
    check("table-map-2^62-columns", src, got, error, seconds, client)
    assert isinstance(error, TruncatedEventError)          # a ParseError
    assert str(error).startswith(f"TABLE_MAP of {T.schema}.{T.name} claims {1 << 62} columns "
                                 f"but only ")
    assert str(error).endswith(f"(at file binlog.000001, position {pos})"), str(error)
    assert seconds < 5


@pytest.mark.fault(timeout=60)
def test_table_map_with_100000_columns_is_a_parse_error():
    """100,000 columns really present (MySQL and MariaDB allow 4096): refused as a ParseError
    before 100,000 column definitions are built."""
    n = 100_000
    tm = table_map(n, b"\x03" * n)
    with FakeSource(binlog_with(hostile_tx(4, tm, write_rows(T.table_id, [(6, "x")])))) as src:
        got, error, seconds, client = stream_until_error(src)
    check("table-map-100000-columns", src, got, error, seconds, client)
    assert isinstance(error, ParseError), repr(error)
    assert f"has {n} columns; MySQL and MariaDB tables have at most 4096" in str(error)
    assert seconds < 5


@pytest.mark.fault(timeout=60)
def test_rows_event_for_an_unknown_table_id_is_a_schema_error():
    rows = write_rows(92, [(6, "orphan")])                  # no TABLE_MAP has id 92
    binlog = binlog_with(hostile_tx(4, B.table_map(T), rows))
    pos = next(off for off, ev, _ in binlog.events()
               if ev[4] == WRITE_ROWS_V2 and ev[19:25] == (92).to_bytes(6, "little"))
    with FakeSource(binlog) as src:
        got, error, seconds, client = stream_until_error(src)
    check("unknown-table-id", src, got, error, seconds, client)
    assert isinstance(error, SchemaError) and str(error) == (
        f"rows event for table id 92 has no TABLE_MAP before it in its transaction (at file "
        f"binlog.000001, position {pos}); the binlog is inconsistent or the reading started "
        f"mid-transaction: start at a transaction boundary (a GTID/BEGIN event)")
