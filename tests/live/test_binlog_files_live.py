"""Damaged real binlogs and the server's binlog end, against the private MariaDB."""

import random

import pymysql
import pytest

from cdc.cli.lag import ServerStatus
from cdc.positions import Position
from cdc.errors import ParseError, TruncatedEventError
from cdc.binlog.files import read_events
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import assemble

pytestmark = pytest.mark.servers


@pytest.mark.server
def test_real_binlog_bit_flips_and_truncation(mariadb, db, binlog_snapshot, tmp_path):
    start_file, _ = mariadb.current_position()
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(50))")
    for i in range(20):
        mariadb.execute(f"INSERT INTO `{db}`.t VALUES ({i}, 'value {i}')")
    (path,) = binlog_snapshot(since_file=start_file)[-1:]
    good = path.read_bytes()
    rows = [c.after for tx in assemble(iter_events(good)) for c in tx.changes() if c.schema == db]
    assert rows == [(i, f"value {i}") for i in range(20)]
    rng = random.Random(11)
    for offset in rng.sample(range(4, len(good)), 200):
        bad = bytearray(good)
        bad[offset] ^= 1 << rng.randrange(8)
        with pytest.raises(ParseError):
            list(iter_events(bytes(bad)))
    cut = tmp_path / "cut.000001"
    cut.write_bytes(good[:len(good) - 7])
    with pytest.raises(TruncatedEventError, match="truncated"):
        list(read_events([cut]))


@pytest.mark.server
def test_live_server_end_matches_show_master_status(mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO {db}.t VALUES (1)")
    file, pos = mariadb.current_position()
    status = ServerStatus(lambda: pymysql.connect(**mariadb.cdc_params(), autocommit=True))
    try:
        first = status.end()
        assert first.same_place(Position(file, pos))
        if mariadb.FLAVOR == "mysql":   # the executed GTID set comes with the end
            assert str(first.gtid) == mariadb.gtid_executed()
        mariadb.execute(f"INSERT INTO {db}.t VALUES (2)")
        end = status.end()
        f2, p2 = end.file, end.pos
        assert f2 == file and p2 > pos
    finally:
        status.close()


@pytest.mark.server
def test_every_file_decoder_gives_text_columns_without_charsets_the_default(
        mariadb_nolog, tmp_path):
    """binlog_row_metadata=NO_LOG: the TABLE_MAP carries no charsets.  The parser on its own
    (BinlogParser, iter_events), read_events and the CLI all decode such text as utf8mb4 (the
    one default), and charset=... / None choose another or none."""
    from cdc.binlog.parser import BinlogParser

    s = mariadb_nolog
    start_file, _ = s.current_position()
    s.execute("CREATE DATABASE IF NOT EXISTS nocs")
    s.execute("CREATE TABLE nocs.t (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4, "
              "tx TEXT CHARACTER SET utf8mb4)")
    s.execute("INSERT INTO nocs.t VALUES (1, 'é✓', 'ü')")
    files = s.snapshot_binlogs(tmp_path / "files", since_file=start_file)
    want = [(1, "é✓", "ü")]

    def rows(events):
        return [c.after for tx in assemble(events) for c in tx.changes()
                if (c.schema, c.table) == ("nocs", "t")]

    data = b"".join(f.read_bytes() for f in files[:1])
    assert rows(read_events(files)) == want
    assert rows(iter_events(data)) == want

    def parsed(**kw):
        p = BinlogParser(**kw)
        p.feed(data)
        out = list(p.events())
        p.close()
        return rows(out)

    assert parsed() == want
    assert parsed(charset="latin1") == rows(read_events(files, charset="latin1")) != want
    assert parsed(charset=None) == [(1, "é✓".encode(), "ü".encode())]
    assert rows(read_events(files, charset="binary")) == parsed(charset="binary") == \
        [(1, "é✓".encode(), "ü".encode())]
