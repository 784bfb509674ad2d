"""Replication protocol pieces without a server: command encodings checked byte by byte against
layouts written out from the protocol documentation, packet framing and reassembly, ERR/EOF
handling, server-error mapping, start specs."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from cdc.errors import (AuthenticationError, BinlogPurgedError, ConfigurationError,
                        PrivilegeError, ReplicationError, ServerIdConflictError)
from cdc.binlog.gtid import GtidSet
from cdc.errors import (ConnectionLost, ProtocolError, TransientServerError, is_transient,
                        map_server_error)
from cdc.replica.packets import MAX_PAYLOAD, PacketReader, frame, is_eof, parse_err, take_over
from cdc.replica.protocol import (binlog_dump, binlog_dump_gtid, heartbeat_period_ns,
                                  register_slave)
from cdc.replica.server import missing_privileges, parse_server_version
from cdc.positions import Position, Start

UUID1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID2 = "8a94f357-aab4-11df-86ab-c80aa9429562"


# --- command encodings ---------------------------------------------------------------------------


def test_com_binlog_dump_gtid_bytes_match_the_documented_layout():
    gtids = GtidSet.parse(f"{UUID2}:1-3,{UUID1}:1-5:7")
    payload = binlog_dump_gtid(gtids.to_bytes(), 4242, flags=1)
    expected = bytes.fromhex(
        "1e"                                    # COM_BINLOG_DUMP_GTID
        "0500"                                  # flags (2): NON_BLOCK 0x01 | THROUGH_GTID 0x04
        "92100000"                              # server_id (4): 4242 = 0x1092
        "00000000"                              # binlog-filename-len (4): 0, no name follows
        "0400000000000000"                      # binlog-pos (8): 4
        "68000000"                              # data-size (4): 104 bytes of GTID data
        # data: Gtid_set::encode -- n_sids (8), then per SID in SID order: SID (16),
        # n_intervals (8), then [start, end) pairs of 8-byte integers
        "0200000000000000"                      # 2 SIDs
        "3e11fa4771ca11e19e33c80aa9429562"      # 3e11fa47-71ca-11e1-9e33-c80aa9429562
        "0200000000000000"                      #   2 intervals
        "0100000000000000" "0600000000000000"   #   [1, 6)  = 1-5
        "0700000000000000" "0800000000000000"   #   [7, 8)  = 7
        "8a94f357aab411df86abc80aa9429562"      # 8a94f357-aab4-11df-86ab-c80aa9429562
        "0100000000000000"                      #   1 interval
        "0100000000000000" "0400000000000000"   #   [1, 4)  = 1-3
    )
    assert payload == expected
    # On the wire: payload length (3 bytes, 127 = 1+2+4+4+8+4+104) and sequence number 0.
    assert frame(payload, 0) == bytes.fromhex("7f000000") + expected


def test_com_binlog_dump_gtid_with_a_file_name_and_empty_set():
    payload = binlog_dump_gtid(GtidSet().to_bytes(), 7, file="binlog.000003", pos=1234)
    assert payload == bytes.fromhex(
        "1e" "0400" "07000000"
        "0d000000" + b"binlog.000003".hex() +   # name length 13, then the name
        "d204000000000000"                      # position 1234
        "08000000" "0000000000000000")          # 8 bytes of data: zero SIDs


def test_com_binlog_dump_bytes():
    assert binlog_dump("mysql-bin.000042", 0x01020304, 4242, flags=1) == bytes.fromhex(
        "12"              # COM_BINLOG_DUMP
        "04030201"        # binlog-pos (4)
        "0100"            # flags (2): BINLOG_DUMP_NON_BLOCK
        "92100000"        # server_id (4)
    ) + b"mysql-bin.000042"   # file name: the rest of the packet, no terminator
    assert binlog_dump("", 4, 1) == bytes.fromhex("12" "04000000" "0000" "01000000")
    with pytest.raises(ConfigurationError):
        binlog_dump("f", 1 << 32, 1)


def test_com_register_slave_bytes():
    assert register_slave(4242, host="cdc-host", port=3307) == bytes.fromhex(
        "15"                   # COM_REGISTER_SLAVE
        "92100000"             # server_id (4)
        "08" + b"cdc-host".hex() +  # hostname: 1-byte length + bytes
        "00"                   # user: empty
        "00"                   # password: empty
        "eb0c"                 # port (2): 3307
        "00000000"             # replication rank (4)
        "00000000")            # master_id (4)
    with pytest.raises(ConfigurationError):
        register_slave(0x1_0000_0000)


def test_heartbeat_period_is_in_nanoseconds():
    assert heartbeat_period_ns(1) == 1_000_000_000
    assert heartbeat_period_ns(0.25) == 250_000_000
    with pytest.raises(ConfigurationError):
        heartbeat_period_ns(0)
    with pytest.raises(ConfigurationError):
        heartbeat_period_ns(5_000_000)


# --- framing and the packet reader ------------------------------------------------------------------


def test_frame_splits_at_16_mib_with_an_empty_trailer_on_exact_multiples():
    big = bytes(MAX_PAYLOAD)
    framed = frame(big, 3)
    assert framed[:4] == b"\xff\xff\xff\x03"
    assert framed[4 + MAX_PAYLOAD:] == b"\x00\x00\x00\x04"   # empty continuation packet
    framed = frame(big + b"xy", 0)
    assert framed[4 + MAX_PAYLOAD:] == b"\x02\x00\x00\x01xy"


def _pair():
    a, b = socket.socketpair()
    a.settimeout(5)
    return a, b


def test_reader_reassembles_payloads_over_16_mib_sent_in_small_pieces():
    a, b = _pair()
    payloads = [b"\x00first", bytes(range(256)) * (MAX_PAYLOAD // 256 + 100), bytes(MAX_PAYLOAD),
                b"\x00last"]
    seq, wire = 0, bytearray()   # one continuous run of sequence numbers
    for p in payloads:
        chunk = frame(p, seq)
        seq += (len(chunk) - len(p)) // 4
        wire += chunk

    def send():
        for i in range(0, len(wire), 1 << 20):
            b.sendall(wire[i:i + (1 << 20)])
    t = threading.Thread(target=send)
    t.start()
    r = PacketReader(a, seq=0)
    got = [r.read_payload() for _ in payloads]
    t.join()
    assert [len(g) for g in got] == [len(p) for p in payloads]
    assert got == payloads
    assert r.seq == seq & 0xFF
    a.close(), b.close()


def test_reader_timeouts_lose_nothing():
    a, b = _pair()
    a.settimeout(0.05)
    r = PacketReader(a, seq=1)
    packet = frame(b"\x00" + b"e" * 100, 1)
    b.sendall(packet[:2])
    with pytest.raises(TimeoutError):
        r.read_payload()
    b.sendall(packet[2:60])
    with pytest.raises(TimeoutError):
        r.read_payload()
    b.sendall(packet[60:])
    assert r.read_payload() == b"\x00" + b"e" * 100


def test_reader_sequence_gap_is_a_protocol_error_but_an_err_packet_may_come_with_seq_0():
    a, b = _pair()
    r = PacketReader(a, seq=1)
    b.sendall(frame(b"\x00ok", 1) + frame(b"\xff\x1d\x04#08S01Server shutdown in progress", 0))
    assert r.read_payload() == b"\x00ok"
    err = parse_err(r.read_payload())
    assert err.code == 1053 and err.sqlstate == "08S01"
    b.sendall(frame(b"\x00x", 7))
    with pytest.raises(ProtocolError, match="sequence number 7"):
        r.read_payload()


def test_ready_takes_every_whole_payload_received_and_stops_where_read_payload_must_go_on():
    """ready(): the batch form of read_payload (the replica client takes a whole receive at a
    time); the same payloads, in order, the same sequence checks."""
    a, b = _pair()
    a.settimeout(0.5)
    big = bytes(range(256)) * (MAX_PAYLOAD // 256 + 10)      # continued over two packets
    first = [b"\x00" + bytes([i]) * i for i in range(1, 40)]
    wire = b"".join(frame(p, 1 + i) for i, p in enumerate(first))
    seq = 1 + len(first)
    wire += frame(b"\x00after", seq) + frame(big, seq + 1)
    r = PacketReader(a, seq=1)
    assert r.ready() == []                                   # nothing received yet
    b.sendall(wire[:len(wire) - len(big) - 8])   # a cut in the big payload's first header
    got = []
    while len(got) < len(first) + 1:
        got += r.ready() or [r.read_payload()]
    assert got == first + [b"\x00after"]
    assert r.ready() == []                                   # a partial header: wait
    t = threading.Thread(target=b.sendall, args=(wire[len(wire) - len(big) - 8:],))
    t.start()
    assert r.read_payload() == big          # ready() leaves a payload of >= 16 MiB to it
    t.join()
    assert r.ready() == [] and r.buffered == 0 and r.seq == (seq + 3) & 0xFF
    # a sequence gap: the payloads before it, then the error
    b.sendall(frame(b"\x00one", r.seq) + frame(b"\x00gap", r.seq + 5))
    while r.buffered < 2 * 8:
        r._recv()
    assert r.ready() == [b"\x00one"]
    with pytest.raises(ProtocolError, match="sequence number"):
        r.ready()
    a.close(), b.close()


def test_reader_eof_mid_packet_is_connection_lost():
    a, b = _pair()
    r = PacketReader(a)
    b.sendall(frame(b"\x00abcdef")[:6])
    b.close()
    with pytest.raises(ConnectionLost, match="middle of a packet"):
        r.read_payload()
    a2, b2 = _pair()
    b2.close()
    with pytest.raises(ConnectionLost, match="closed the connection"):
        PacketReader(a2).read_payload()


def test_take_over_keeps_bytes_pymysqls_buffered_reader_already_read():
    a, b = _pair()
    rfile = a.makefile("rb")   # what PyMySQL reads through
    first, second = frame(b"\x00one", 1), frame(b"\x00two", 2)
    b.sendall(first + second)
    time.sleep(0.05)
    assert rfile.read(len(first)) == first   # its buffer now also holds the second packet

    class Conn:   # the two attributes of a PyMySQL connection take_over() uses
        _sock = a
        _rfile = rfile
    r = take_over(Conn(), seq=2)
    assert r.buffered == len(second)
    assert a.gettimeout() == 5                 # the socket's timeout is restored
    assert r.read_payload() == b"\x00two"
    b.sendall(frame(b"\x00three", 3))
    assert r.read_payload() == b"\x00three"   # and then straight from the socket


def test_err_and_eof_packets():
    e = parse_err(b"\xff\xd4\x04#HY000Could not find first log file name in binary log index file")
    assert e.code == 1236 and e.sqlstate == "HY000" and e.message.startswith("Could not find")
    assert parse_err(b"\xff\x15\x04no state").message == "no state"   # pre-4.1 style
    assert is_eof(b"\xfe\x00\x00\x02\x00")
    assert not is_eof(b"\x00\x00\x00\x00\x00") and not is_eof(b"")


# --- what server errors become -------------------------------------------------------------------------


def test_access_denied_names_the_user():
    e = map_server_error(1045, "Access denied for user 'cdc'@'10.0.0.7' (using password: YES)",
                         user="cdc", where="db:3306")
    assert isinstance(e, AuthenticationError)
    assert "'cdc'" in str(e) and "db:3306" in str(e) and "password" in str(e)


def test_purged_binlog_errors_say_which_file_or_gtids():
    e = map_server_error(1236, "Could not find first log file name in binary log index file",
                         start="file mysql-bin.000001 position 4")
    assert isinstance(e, BinlogPurgedError) and "mysql-bin.000001" in str(e)
    mysql = ("Cannot replicate because the source purged required binary logs. Replicate the "
             "missing transactions from elsewhere, or provision a new replica from backup. "
             "Consider increasing the source's binary log expiration period. The GTID set sent "
             f"by the replica is '{UUID1}:1-10', and the missing transactions are "
             f"'{UUID1}:11-20'")
    e = map_server_error(1236, mysql, start=f"GTID set '{UUID1}:1-10'")
    assert isinstance(e, BinlogPurgedError) and f"missing GTIDs are {UUID1}:11-20" in str(e)
    maria = ("Could not find GTID state requested by slave in any binlog files. Probably the "
             "slave state is too old and required binlog files have been purged.")
    e = map_server_error(1236, maria, start="MariaDB GTID position '0-1-5'")
    assert isinstance(e, BinlogPurgedError) and "0-1-5" in str(e)


def test_other_error_mappings():
    e = map_server_error(1227, "Access denied; you need (at least one of) the REPLICATION SLAVE "
                               "privilege(s) for this operation", user="cdc",
                         grant="GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';")
    assert isinstance(e, PrivilegeError) and "GRANT REPLICATION SLAVE" in str(e)
    e = map_server_error(1236, "A replica with the same server_uuid/server_id as this replica "
                               "has connected to the source")
    assert isinstance(e, ServerIdConflictError)
    for code in (1053, 1927, 2013, 2003):
        e = map_server_error(code, "gone")
        assert isinstance(e, TransientServerError) and is_transient(e)
    e = map_server_error(1236, "some other binlog problem")
    assert type(e) is ReplicationError and not is_transient(e)
    assert is_transient(ConnectionLost("x")) and is_transient(OSError("x"))
    assert not is_transient(BinlogPurgedError("x"))


def test_missing_privileges_from_show_grants():
    assert missing_privileges([
        "GRANT SELECT, RELOAD, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` "
        "IDENTIFIED BY PASSWORD '*AB'"]) == []
    assert missing_privileges(["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `c`@`%`"]) \
        == []
    assert missing_privileges(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"]) == []
    assert missing_privileges(["GRANT USAGE ON *.* TO `x`@`%`",
                               "GRANT ALL PRIVILEGES ON `app`.* TO `x`@`%`"]) == \
        ["REPLICATION SLAVE", "REPLICATION CLIENT"]
    # privileges that come through a role are not listed: cannot tell
    assert missing_privileges(["GRANT USAGE ON *.* TO `x`@`%`", "GRANT `cdc_role`@`%` TO `x`@`%`"]) \
        is None


def test_server_versions():
    v = parse_server_version("5.5.5-10.11.6-MariaDB-0+deb12u1-log")
    assert v.is_mariadb and v.version == (10, 11, 6)
    v = parse_server_version("8.4.0")
    assert not v.is_mariadb and v.version == (8, 4, 0) and v.flavor == "MySQL"


# --- start specs -----------------------------------------------------------------------------------------


def test_start_specs():
    assert Start.parse("earliest").kind == "earliest" and Start.parse("LATEST").kind == "latest"
    s = Start.parse("mysql-bin.000003:1234")
    assert (s.kind, s.file, s.pos) == ("file", "mysql-bin.000003", 1234)
    assert Start.parse(("f.000001", 4)).file == "f.000001"
    s = Start.parse("0-1-42,1-2-7")
    assert s.kind == "mariadb_gtid" and s.gtid == "0-1-42,1-2-7"
    s = Start.parse(f"{UUID1}:1-42")
    assert s.kind == "gtid" and s.gtid == f"{UUID1}:1-42"
    with pytest.raises(ConfigurationError):
        Start.parse("no such thing")
    with pytest.raises(ConfigurationError):
        Start.at("f", 3)
    p = Position("mysql-bin.000002", 999)
    assert Start.parse(p) == Start.at("mysql-bin.000002", 999)
    assert p.cli_args() == "--file mysql-bin.000002 --pos 999"
    p = Position("x", 5, GtidSet.parse(f"{UUID1}:1-3"))
    assert Start.parse(p).kind == "gtid" and p.cli_args() == f"--gtid '{UUID1}:1-3'"
