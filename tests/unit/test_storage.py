"""Binlog files through a storage layer (cdc.binlog.storage, streaming.source.storage): listing on any
filesystem, streamed reads (never a whole file), file:// URLs through pyarrow.fs, the fs.*
options, and paths resolved on the driver (issue 17, items 4 and 6)."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest

from support.binlog_builder import FDE_8020, binlog_file, event, lenenc, rows_v2_body, \
    table_map_body, xid_body, query_body
from cdc.binlog.constants import EventType
from cdc.binlog.files import BinlogFileReader, binlog_paths
from cdc.binlog.storage import LOCAL, Storage, expand, url_scheme
from cdc.errors import ConfigurationError


def table_map(table_id: int = 7) -> bytes:
    body = table_map_body(
        table_id, "shop", "t", bytes([3, 15]), struct.pack("<H", 80), b"\x02",
        optional=b"\x04" + lenenc(8) + lenenc(2) + b"id" + lenenc(4) + b"name"
        + b"\x02" + lenenc(1) + lenenc(45))
    return event(EventType.TABLE_MAP, body)


def row(id_: int, name: str) -> bytes:
    raw = name.encode()
    return b"\x00" + struct.pack("<i", id_) + bytes((len(raw),)) + raw


def binlog(n_tx: int, first_id: int = 0) -> bytes:
    evs = [FDE_8020]
    for i in range(first_id, first_id + n_tx):
        evs += [event(EventType.QUERY, query_body("BEGIN", "shop")), table_map(),
                event(EventType.WRITE_ROWS, rows_v2_body(7, 2, row(i, f"n{i}"))),
                event(EventType.XID, xid_body(i))]
    return binlog_file(evs)


class MemoryStorage(Storage):
    """Files in a dict, spelled ``mem://dir/name``; records every read size."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.reads: list[int] = []

    def kind(self, path):
        path = path.rstrip("/")
        if path in self.files:
            return "file"
        if any(f.startswith(path + "/") for f in self.files):
            return "dir"
        return None

    def list_files(self, directory):
        d = directory.rstrip("/") + "/"
        return [f for f in self.files if f.startswith(d) and "/" not in f[len(d):]]

    def size(self, path):
        return len(self.files[path])

    def open(self, path, offset=0):
        storage = self

        class Stream(io.BytesIO):
            def read(self, n=-1):
                assert n is not None and n > 0, "a whole file was read at once"
                storage.reads.append(n)
                return super().read(n)

        s = Stream(self.files[path])
        s.seek(offset)
        return s


def rows_of(reader) -> list[tuple]:
    """(file, event position, row) of every rows event the reader decodes."""
    from cdc.binlog.events import RowsEvent
    return [(ev.file, ev.pos, r) for ev in reader.events() if isinstance(ev, RowsEvent)
            for r in ev.rows]


def test_url_scheme():
    assert url_scheme("s3://b/k") == "s3" and url_scheme("HDFS://nn:8020/x") == "hdfs"
    assert url_scheme("/tmp/x") is None and url_scheme("binlogs/mysql-bin.000001") is None
    assert url_scheme(r"C:\binlogs") is None


def test_expand_on_another_storage_directory_index_glob_and_order():
    a, b, c = binlog(3), binlog(2, 100), binlog(1, 200)
    st = MemoryStorage({"mem://bk/logs/mysql-bin.000002": b, "mem://bk/logs/mysql-bin.000001": a,
                        "mem://bk/logs/notes.txt": b"x", "mem://bk/other/mysql-bin.000003": c,
                        "mem://bk/idx/my.index": b"./mysql-bin.000009\n/abs/mysql-bin.000008\n",
                        "mem://bk/idx/mysql-bin.000008": c, "mem://bk/idx/mysql-bin.000009": a})
    assert expand(["mem://bk/logs"], st) == ["mem://bk/logs/mysql-bin.000001",
                                             "mem://bk/logs/mysql-bin.000002"]
    assert expand(["mem://bk/other/mysql-bin.000003", "mem://bk/logs/*.000002"], st) == [
        "mem://bk/other/mysql-bin.000003", "mem://bk/logs/mysql-bin.000002"]
    # the index's order, its names looked up beside it
    assert expand(["mem://bk/idx"], st) == ["mem://bk/idx/mysql-bin.000009",
                                            "mem://bk/idx/mysql-bin.000008"]
    with pytest.raises(ConfigurationError, match="no binlog file at mem://bk/nothing"):
        expand(["mem://bk/nothing"], st)


def test_reader_streams_chunks_from_a_storage_and_equals_the_local_read(tmp_path):
    data = {"mem://bk/logs/mysql-bin.000001": binlog(300),
            "mem://bk/logs/mysql-bin.000002": binlog(50, 1000)}
    for name, raw in data.items():
        (tmp_path / name.rpartition("/")[2]).write_bytes(raw)
    st = MemoryStorage(data)
    remote = rows_of(BinlogFileReader(["mem://bk/logs/"], storage=st, chunk_size=4096))
    local = rows_of(BinlogFileReader([tmp_path]))
    assert len(local) == 350 and remote == local
    assert local[0][0] == "mysql-bin.000001" and local[-1][0] == "mysql-bin.000002"
    assert len(data["mem://bk/logs/mysql-bin.000001"]) > 10 * 4096
    assert st.reads and max(st.reads) == 4096        # streamed: 4 KiB reads, never a whole file


def test_reader_start_and_stop_positions_on_a_storage(tmp_path):
    raw = binlog(40)
    (tmp_path / "mysql-bin.000001").write_bytes(raw)
    local_all = rows_of(BinlogFileReader([tmp_path / "mysql-bin.000001"]))
    start, stop = local_all[10][1] - 200, local_all[30][1]
    # a transaction start: the first event at or after `start` (BEGIN of tx 10)
    start = [ev.pos for ev in BinlogFileReader([tmp_path / "mysql-bin.000001"]).events()
             if ev.pos is not None and ev.pos >= start and ev.__class__.__name__ == "QueryEvent"][0]
    st = MemoryStorage({"mem://b/mysql-bin.000001": raw})
    got = rows_of(BinlogFileReader(["mem://b/mysql-bin.000001"], storage=st, start_position=start,
                                   stop_position=stop, chunk_size=512))
    want = rows_of(BinlogFileReader([tmp_path / "mysql-bin.000001"], start_position=start,
                                    stop_position=stop))
    assert got == want and 0 < len(got) < 40


def test_local_binlog_paths_unchanged(tmp_path):
    for n in (2, 1, 3):
        (tmp_path / f"mysql-bin.00000{n}").write_bytes(binlog(1))
    (tmp_path / "junk").write_bytes(b"")
    assert [p.name for p in binlog_paths([tmp_path])] == [
        "mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"]
    assert [p.name for p in binlog_paths([str(tmp_path / "*.000003")])] == ["mysql-bin.000003"]
    assert expand([str(tmp_path / "mysql-bin.000002")], LOCAL) == [str(tmp_path / "mysql-bin.000002")]


def test_urls_on_the_local_reader_and_the_cli(tmp_path):
    (tmp_path / "mysql-bin.000001").write_bytes(binlog(3))
    assert [p.name for p in binlog_paths([f"file://{tmp_path}"])] == ["mysql-bin.000001"]
    assert [p.name for p in binlog_paths([f"file://localhost{tmp_path}/mysql-bin.000001"])] == \
        ["mysql-bin.000001"]
    with pytest.raises(ConfigurationError, match=r"s3://b/k: a s3:// URL, and this reads local "
                                                 r"files only: read it with the Spark source"):
        binlog_paths(["s3://b/k"])
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "cdc", "decode", "gs://bucket/binlogs/"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert r.returncode == 2 and "gs://bucket/binlogs/: a gs:// URL" in r.stderr
    assert "Traceback" not in r.stderr


# --- pyarrow.fs (streaming.source.storage) -------------------------------------------------------------

pytest.importorskip("pyarrow")
from streaming.source.storage import ArrowStorage, redacted, storage_for, storage_settings  # noqa: E402


def test_file_urls_read_through_pyarrow_fs_equal_the_local_read(tmp_path):
    (tmp_path / "mysql-bin.000001").write_bytes(binlog(120))
    (tmp_path / "mysql-bin.000002").write_bytes(binlog(5, 500))
    url = f"file://{tmp_path}/"
    st = storage_for([url], {})
    assert isinstance(st, ArrowStorage)
    assert expand([url], st) == [f"file://{tmp_path}/mysql-bin.000001",
                                 f"file://{tmp_path}/mysql-bin.000002"]
    got = rows_of(BinlogFileReader([url], storage=st, chunk_size=1000))
    assert got == rows_of(BinlogFileReader([tmp_path])) and len(got) == 125


def test_fs_options_become_pyarrow_keywords_and_secrets_are_redacted():
    s = storage_settings({"fs.s3.endpoint": "http://127.0.0.1:9000", "fs.s3.accesskey": "AK",
                          "fs.S3.secretKey": "SK", "fs.s3a.region": "eu-west-1", "host": "x"})
    assert s == {"s3": {"endpoint": "http://127.0.0.1:9000", "accesskey": "AK",
                        "secretkey": "SK", "region": "eu-west-1"}}
    st = storage_for(["s3://bucket/binlogs/"], s)
    assert st.fs.region == "eu-west-1"
    assert redacted(s)["s3"]["secretkey"] == "***" and redacted(s)["s3"]["accesskey"] == "***"
    assert redacted(s)["s3"]["region"] == "eu-west-1"
    with pytest.raises(ConfigurationError, match="fs.<scheme>.<name>"):
        storage_settings({"fs.s3": "x"})
    with pytest.raises(ConfigurationError, match=r"fs\.s3\.\*"):
        storage_for(["s3://b/k"], {"s3": {"nosuchkeyword": "1"}})
    with pytest.raises(ConfigurationError, match="one filesystem"):
        storage_for(["s3://b/k", "/tmp/x"], {})
    with pytest.raises(ConfigurationError, match="ftp:// is not a filesystem"):
        storage_for(["ftp://h/x"], {})
    assert storage_for(["/tmp/x", "rel/x"], {}) is LOCAL


# --- the Spark source's options and partitions (driver side, no session) ------------------------

pytest.importorskip("pyspark")
from streaming.source.options import SourceOptions  # noqa: E402
from streaming.source.files import FileBatchReader  # noqa: E402


def test_relative_paths_are_resolved_on_the_driver(tmp_path, monkeypatch):
    (tmp_path / "binlogs").mkdir()
    for n in (1, 2):
        (tmp_path / "binlogs" / f"mysql-bin.00000{n}").write_bytes(binlog(1))
    monkeypatch.chdir(tmp_path)
    opts = SourceOptions.parse({"path": "binlogs/"})
    parts = FileBatchReader(opts, None, None).partitions()
    assert [p.path for p in parts] == [str(tmp_path / "binlogs" / f"mysql-bin.00000{n}")
                                       for n in (1, 2)]
    assert all(os.path.isabs(p.path) for p in parts)


def test_row_decoder_and_fs_options_travel_in_the_options():
    opts = SourceOptions.parse({"path": "s3://b/k/", "rowdecoder": "Python",
                                "fs.s3.endpoint": "http://127.0.0.1:1", "fs.s3.secretkey": "s3cr3t"})
    assert opts.row_decoder == "python"
    assert opts.storage == {"s3": {"endpoint": "http://127.0.0.1:1", "secretkey": "s3cr3t"}}
    assert "s3cr3t" not in repr(opts)
    with pytest.raises(ConfigurationError, match="option rowDecoder must be c, python or auto"):
        SourceOptions.parse({"path": "/x", "rowDecoder": "fast"})
    with pytest.raises(ConfigurationError, match="endingPosition"):
        SourceOptions.parse({"host": "h", "endingPosition": "earliest"})
    assert SourceOptions.parse({"host": "h", "user": "u", "rowDecoder": "c"}) \
        .replica_config().row_decoder == "c"
