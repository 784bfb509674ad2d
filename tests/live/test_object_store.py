"""Archived binlogs on an object store (issue 17, item 4): real binlog files of the embedded
MariaDB uploaded to a bucket of a local S3-compatible server (moto in server mode on
127.0.0.1) read with ``spark.read.format("binlog-cdc").load("s3://bucket/binlogs/")``: the
same DataFrame as the local-file read, one task per file; file:// URLs too."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

pytestmark = [pytest.mark.server, pytest.mark.spark]

KEYS = {"fs.s3.accessKey": "testing", "fs.s3.secretKey": "testing-secret",
        "fs.s3.region": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """(endpoint URL, boto3 client) of a moto S3 server on 127.0.0.1."""
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing-secret")
    try:
        yield endpoint, client
    finally:
        server.stop()


def _workload(mariadb, db: str) -> None:
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), d DECIMAL(10,2))")
        for k in range(0, 3000, 500):
            cur.execute("INSERT INTO t VALUES " + ",".join(
                f"({i}, 'v{i}-\u00e9', {i}.25)" for i in range(k, k + 500)))
            if k == 1000:
                cur.execute("FLUSH BINARY LOGS")
        cur.execute("UPDATE t SET v = 'upd' WHERE id % 7 = 0")
        cur.execute("DELETE FROM t WHERE id >= 2900")
    conn.close()


def _read(spark, path, **options):
    r = spark.read.format("binlog-cdc")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def test_s3_bucket_read_equals_the_local_read(spark, mariadb, db, binlog_snapshot, s3):
    endpoint, client = s3
    start = mariadb.current_position()
    _workload(mariadb, db)
    files = binlog_snapshot(since_file=start[0])
    assert len(files) >= 2
    client.create_bucket(Bucket="archive")
    for f in files:
        client.upload_file(str(f), "archive", f"binlogs/{f.name}")
    client.put_object(Bucket="archive", Key="binlogs/README.txt", Body=b"not a binlog")

    local = _read(spark, str(files[0].parent), includeTables=f"{db}.*")
    remote = _read(spark, "s3://archive/binlogs/", includeTables=f"{db}.*",
                   **{"fs.s3.endpoint": endpoint, **KEYS})
    assert remote.rdd.getNumPartitions() == len(files)          # one task per file
    want = sorted(local.collect(), key=lambda r: r.seq)
    got = sorted(remote.collect(), key=lambda r: r.seq)
    assert len(want) == 3000 + 3000 // 7 + 1 + 100
    assert got == want
    assert len({r.source.file for r in got}) >= 2           # the rows span the files

    # a glob and a single object, and typed mode (the schema from the files)
    one = _read(spark, f"s3://archive/binlogs/{files[0].name}", includeTables=f"{db}.*",
                **{"fs.s3.endpoint": endpoint, **KEYS})
    assert sorted(one.collect(), key=lambda r: r.seq) == \
        [r for r in want if r.source.file == files[0].name]
    globbed = _read(spark, "s3://archive/binlogs/*.0*", includeTables=f"{db}.*",
                    **{"fs.s3.endpoint": endpoint, **KEYS})
    assert globbed.count() == len(want)
    typed = _read(spark, "s3://archive/binlogs/", table=f"{db}.t",
                  **{"fs.s3.endpoint": endpoint, **KEYS})
    typed_local = _read(spark, str(files[0].parent), table=f"{db}.t")
    assert typed.schema == typed_local.schema
    assert sorted(typed.collect(), key=lambda r: r.seq) == \
        sorted(typed_local.collect(), key=lambda r: r.seq)


def test_s3_errors_say_what_to_do(spark, s3):
    endpoint, _ = s3
    from pyspark.errors import PySparkException
    with pytest.raises(Exception, match="no binlog file at s3://archive-missing/x"):
        _read(spark, "s3://archive-missing/x/", **{"fs.s3.endpoint": endpoint, **KEYS}).collect()
    with pytest.raises((PySparkException, Exception), match="fs.<scheme>.<name>"):
        _read(spark, "s3://archive/x/", **{"fs.s3": "oops"}).collect()


def test_file_url_read_equals_the_local_read(spark, mariadb, db, binlog_snapshot):
    start = mariadb.current_position()
    _workload(mariadb, db)
    files = binlog_snapshot(since_file=start[0])
    local = _read(spark, str(files[0].parent), includeTables=f"{db}.*")
    url = _read(spark, f"file://{files[0].parent}", includeTables=f"{db}.*")
    assert sorted(url.collect(), key=lambda r: r.seq) == sorted(local.collect(), key=lambda r: r.seq)
