"""The private server launchers (cdc.embedded: MariaDB 10.11, MariaDB 11.8 and MySQL 9.7 from
private roots) and the shared fixtures of conftest.py, on each server."""

from __future__ import annotations

import re
import socket
import struct

import pymysql
import pytest
from pymysql.constants import COMMAND

import cdc.embedded as embedded
from cdc.embedded import EmbeddedMariaDB, free_port
from cdc.errors import ConfigurationError

pytestmark = [pytest.mark.server, pytest.mark.servers]

EXPECTED_VERSION = {"mariadb-10.11": ("MariaDB", (10, 11)), "mariadb-11.8": ("MariaDB", (11, 8)),
                    "mysql-9.7": ("", (9, 7))}

MAGIC = b"\xfebin"
ROTATE_EVENT, FORMAT_DESCRIPTION_EVENT, TABLE_MAP_EVENT, WRITE_ROWS_EVENT_V1 = 4, 15, 19, 23
WRITE_ROWS_EVENT_V2 = 30


def _variables(server, names):
    rows = server.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ("
                          + ", ".join(["%s"] * len(names)) + ")", list(names))
    return dict(rows)


def test_binlog_is_row_based_with_full_images_and_metadata(server):
    common = ["log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
              "server_id", "max_allowed_packet", "character_set_server", "bind_address", "port"]
    gtid = ["gtid_strict_mode"] if server.FLAVOR == "mariadb" else ["gtid_mode",
                                                                     "enforce_gtid_consistency"]
    v = _variables(server, common + gtid)
    assert v == {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "server_id": "1",
        "max_allowed_packet": str(64 * 1024 * 1024),
        "character_set_server": "utf8mb4",
        "bind_address": "127.0.0.1",
        "port": str(server.port),
        **({"gtid_strict_mode": "OFF"} if server.FLAVOR == "mariadb" else
           {"gtid_mode": "ON", "enforce_gtid_consistency": "ON"}),
    }
    word, version = EXPECTED_VERSION[server.server_name]
    assert word in server.version
    assert server.version_tuple[:2] == version
    assert server.execute("SHOW DATABASES LIKE 'cdc_test'") == [("cdc_test",)]


def test_cdc_user_can_list_binlogs_and_read_the_position(mariadb):
    conn = pymysql.connect(**mariadb.cdc_params())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == "cdc@%"
            cur.execute("SHOW BINARY LOGS")
            names = [r[0] for r in cur.fetchall()]
            cur.execute("SHOW MASTER STATUS" if mariadb.FLAVOR == "mariadb"
                        else "SHOW BINARY LOG STATUS")
            file, pos = cur.fetchone()[:2]
            cur.execute("SHOW GRANTS")
            grants = cur.fetchone()[0]
    finally:
        conn.close()
    assert names == [p.name for p in mariadb.binlog_files()]
    assert names and all(n.startswith("mysql-bin.") for n in names)
    assert (file, pos) == mariadb.current_position()
    assert file == names[-1] and pos >= 4
    for priv in ("REPLICATION SLAVE", "SELECT", "RELOAD", "PROCESS", "SHOW DATABASES"):
        assert priv in grants
    if mariadb.FLAVOR == "mysql":
        assert "REPLICATION CLIENT" in grants
    elif mariadb.version_tuple >= (10, 5, 2):
        assert "BINLOG MONITOR" in grants  # what REPLICATION CLIENT became in 10.5.2


def test_cdc_user_can_dump_the_binlog(mariadb, db):
    """COM_BINLOG_DUMP as the cdc user streams ROTATE, FORMAT_DESCRIPTION ... WRITE_ROWS."""
    mariadb.flush_binary_logs()     # a file of its own: earlier tests wrote to the current one
    file, pos = mariadb.current_position()
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (1, 'one')")

    conn = mariadb.connect("cdc")
    types, table_maps = [], []
    try:
        with conn.cursor() as cur:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @mariadb_slave_capability = 4")
        payload = struct.pack("<IHI", 4, 0x01, 4242) + file.encode()  # NON_BLOCK, server 4242
        conn._execute_command(COMMAND.COM_BINLOG_DUMP, payload)
        while True:
            packet = conn._read_packet()
            if packet.is_eof_packet():
                break
            data = packet.get_all_data()
            assert data[0] == 0
            event_type = data[1 + 4]
            types.append(event_type)
            if event_type == TABLE_MAP_EVENT:
                table_maps.append(data)
    finally:
        conn.close()
    assert types[0] == ROTATE_EVENT
    assert FORMAT_DESCRIPTION_EVENT in types
    # MariaDB writes WRITE_ROWS_EVENT_V1 (23), MySQL WRITE_ROWS_EVENT (30)
    assert types.count(WRITE_ROWS_EVENT_V1) + types.count(WRITE_ROWS_EVENT_V2) == 1
    assert any(db.encode() in tm and b"\x01t\x00" in tm for tm in table_maps)


def test_flush_binary_logs_adds_one_file_and_every_file_has_the_magic(mariadb):
    before = mariadb.binlog_files()
    mariadb.flush_binary_logs()
    after = mariadb.binlog_files()
    assert len(after) == len(before) + 1
    assert after[:-1] == before
    assert mariadb.current_position() == (after[-1].name, mariadb.current_position()[1])
    assert after[-1].name == mariadb.current_position()[0]
    for f in after:
        assert f.parent == mariadb.datadir
        with open(f, "rb") as fh:
            assert fh.read(4) == MAGIC, f


def test_db_fixture_gives_an_empty_scratch_database(mariadb, db):
    assert re.fullmatch(r"t_db_fixture_gives_an_empty_scratch_[a-z_]*_\d+", db) and len(db) <= 64
    assert mariadb.execute("SHOW DATABASES LIKE %s", (db,)) == [(db,)]
    assert mariadb.execute(f"SHOW TABLES FROM `{db}`") == []
    mariadb.execute("CREATE TABLE t (id INT)", database=db)
    assert mariadb.execute("SHOW TABLES", database=db) == [("t",)]


def test_a_16_mib_blob_fits_through_the_connection(mariadb, db):
    blob = bytes(range(256)) * (16 * 1024 * 1024 // 256)
    mariadb.execute("CREATE TABLE b (id INT PRIMARY KEY, data LONGBLOB)", database=db)
    mariadb.execute("INSERT INTO b VALUES (1, %s)", (blob,), database=db)
    assert mariadb.execute("SELECT LENGTH(data), SHA2(data, 256) = SHA2(%s, 256) FROM b", (blob,),
                           database=db) == [(len(blob), 1)]


def test_binlog_snapshot_copies_closed_files(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    mariadb.execute(f"CREATE TABLE `{db}`.snap (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{db}`.snap VALUES (7)")
    copies = binlog_snapshot(since_file=start_file)
    assert [c.name for c in copies][0] == start_file
    originals = {p.name: p for p in mariadb.binlog_files()}
    assert mariadb.current_position()[0] not in [c.name for c in copies]  # the open file
    for c in copies:
        assert c.read_bytes()[:4] == MAGIC
        assert c.stat().st_size == originals[c.name].stat().st_size  # closed: no more growth
    assert b"snap" in b"".join(c.read_bytes() for c in copies)
    again = binlog_snapshot(since_file=start_file)
    assert again[0].parent != copies[0].parent and len(again) == len(copies) + 1


def test_restart_keeps_binlogs_kill_recovers_and_stop_is_idempotent(server, tmp_path,
                                                                    mariadb_factory):
    server = mariadb_factory(basedir=tmp_path / "m", server_id=7,
                             extra_options={"max-connections": 33, "binlog_checksum": "NONE"})
    with server:  # already started: __enter__ is a no-op, __exit__ stops and cleans up
        assert (server.host, server.datadir) == ("127.0.0.1", tmp_path / "m" / "data")
        assert _variables(server, ["server_id", "max_connections", "binlog_checksum"]) == {
            "server_id": "7", "max_connections": "33", "binlog_checksum": "NONE"}
        server.execute("CREATE TABLE cdc_test.r (id INT PRIMARY KEY)")
        server.execute("INSERT INTO cdc_test.r VALUES (1)")
        before = server.binlog_files()
        port = server.port

        server.restart()
        after = server.binlog_files()
        assert server.port == port
        assert after[:len(before)] == before and len(after) == len(before) + 1
        assert all(p.exists() and p.read_bytes()[:4] == MAGIC for p in after)
        assert server.execute("SELECT id FROM cdc_test.r") == [(1,)]
        assert pymysql.connect(**server.cdc_params()).close() is None  # user survives

        server.kill()
        assert not server.is_running()
        server.start()
        server.execute("INSERT INTO cdc_test.r VALUES (2)")
        assert server.execute("SELECT COUNT(*) FROM cdc_test.r") == [(2,)]
        assert len(server.binlog_files()) == len(after) + 1

        server.stop()
        server.stop()
        assert not server.is_running() and server.pid is None
        with pytest.raises(pymysql.err.OperationalError):
            pymysql.connect(**server.root_params(), connect_timeout=2)
    assert (tmp_path / "m" / "data").is_dir()  # a basedir we were given is kept
    server.cleanup()


@pytest.mark.servers("mariadb-10.11")
def test_missing_mariadbd_is_a_configuration_error(monkeypatch, tmp_path):
    monkeypatch.setattr(embedded.mariadb, "find_executable", lambda *a, **k: None)
    server = EmbeddedMariaDB(tmp_path)
    with pytest.raises(ConfigurationError, match="apt-get install mariadb-server"):
        server.start()
    assert not server.is_running()


def test_a_missing_private_root_names_the_command_that_makes_it(monkeypatch, tmp_path):
    monkeypatch.setenv("BINLOG_CDC_SERVER_ROOTS", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ConfigurationError, match=r"tools/server_root.sh mysql-9.7"):
        embedded.embedded_server("mysql-9.7")
    with pytest.raises(ConfigurationError, match="unknown embedded server 'mysql-5.0'"):
        embedded.embedded_server("mysql-5.0")


def test_the_servers_reference_decoder_is_their_own(server):
    """mysqlbinlog / mariadb-binlog of the server's own root (the machine's for 10.11)."""
    import subprocess
    name = "mysqlbinlog" if server.FLAVOR == "mysql" else "mariadb-binlog"
    program = server.program(name)
    assert program is not None
    out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and name in out.stdout
    if server.root is not None:
        assert program.startswith(str(server.root))


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_mysql84_container_has_gtids_and_row_binlog(mysql84):
    assert mysql84.version.startswith("8.4")
    rows = dict(mysql84.execute(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
        "('gtid_mode', 'enforce_gtid_consistency', 'log_bin', 'binlog_format', "
        "'binlog_row_image', 'binlog_row_metadata')"))
    assert rows == {"gtid_mode": "ON", "enforce_gtid_consistency": "ON", "log_bin": "ON",
                    "binlog_format": "ROW", "binlog_row_image": "FULL",
                    "binlog_row_metadata": "FULL"}
    conn = pymysql.connect(**mysql84.cdc_params())
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert cur.fetchall()
    finally:
        conn.close()
