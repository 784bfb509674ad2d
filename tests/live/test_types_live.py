"""The type matrix on the live MariaDB: decoded row images equal the server's own SELECT, and
our rendering of them equals mariadb-binlog -v line for line."""

import datetime as dt
import struct
import subprocess
from decimal import Decimal

import pytest

from cdc.values.kinds import ABSENT, Geometry, InvalidTemporal
from cdc.binlog.constants import EventType
from cdc.binlog.events import RowsEvent
from cdc.binlog.files import read_events
from cdc.values.render import mysqlbinlog_rows
from cdc.binlog.transactions import assemble

pytestmark = pytest.mark.server

COLUMNS = """
 id INT UNSIGNED PRIMARY KEY,
 ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT,
 mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
 f FLOAT, d DOUBLE, dc DECIMAL(10,2), dc2 DECIMAL(65,30), dc3 DECIMAL(18,9), dc0 DECIMAL(5,0),
 b1 BIT(1), b64 BIT(64), b10 BIT(10), y YEAR, dd DATE, t0 TIME, t3 TIME(3), t6 TIME(6),
 dtm0 DATETIME, dtm1 DATETIME(1), dtm6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
 c CHAR(10) CHARACTER SET utf8mb4, cl CHAR(5) CHARACTER SET latin1,
 vc VARCHAR(300) CHARACTER SET utf8mb4, vl VARCHAR(10) CHARACTER SET latin1,
 bn BINARY(4), vb VARBINARY(300), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
 tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
 e ENUM('a','b','c'), s SET('x','y','z'), j JSON, g GEOMETRY, pt POINT
"""
NAMES = [line.split()[0] for line in COLUMNS.replace(",\n", "\n").replace(", ", "\n").split("\n")
         if line.strip()]

MAX_ROW = ("1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, "
           "9223372036854775807, 18446744073709551615, 3.4e38, 1.7976931348623157e308, "
           "99999999.99, 99999999999999999999999999999999999.999999999999999999999999999999, "
           "999999999.999999999, 99999, 1, 18446744073709551615, 1023, 2155, '9999-12-31', "
           "'838:59:59', '838:59:59.999', '838:59:59.999999', '9999-12-31 23:59:59', "
           "'9999-12-31 23:59:59.9', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07', "
           "'2038-01-19 03:14:07.999999', 'ééééééééé😀', 'ÿÿÿÿÿ', REPEAT('😀', 300), 'abcdefghij', "
           "x'ffffffff', REPEAT(x'ff', 300), REPEAT('t', 255), REPEAT('x', 65535), "
           "REPEAT('m', 70000), REPEAT('l', 100000), REPEAT(x'01', 255), REPEAT(x'02', 65535), "
           "REPEAT(x'03', 70000), REPEAT(x'04', 100000), 'c', 'x,y,z', "
           "CONCAT('{\"k\": [', REPEAT('1,', 30000), '1]}'), ST_GeomFromText('LINESTRING(0 0,1 1,2 2)'), "
           "ST_GeomFromText('POINT(-1.5 2.25)', 4326)")
MIN_ROW = ("2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, "
           "-3.4e38, -1.7976931348623157e308, -99999999.99, "
           "-99999999999999999999999999999999999.999999999999999999999999999999, "
           "-0.000000001, -99999, 0, 0, 0, 1901, '1000-01-01', '-838:59:59', '-838:59:59.999', "
           "'-00:00:00.000001', '1000-01-01 00:00:00', '1000-01-01 00:00:00.1', "
           "'1000-01-01 00:00:00.000001', '1970-01-01 00:00:01', '1970-01-01 00:00:01.000001', "
           "'', '', '', '', x'00', x'', '', '', '', '', x'', x'', x'', x'', 'a', '', '[]', "
           "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('POINT(0 0)')")
NULL_ROW = "3" + ", NULL" * (len(NAMES) - 1)


def rows_for(server) -> tuple[str, str, str]:
    """MAX_ROW, MIN_ROW, NULL_ROW as ``server`` takes them: MySQL's TIME(n) ends at
    838:59:59.000000 (MariaDB's at 838:59:59.999999)."""
    if getattr(server, "FLAVOR", "mariadb") == "mysql":
        return (MAX_ROW.replace("'838:59:59.999', '838:59:59.999999'",
                                "'838:59:59.000', '838:59:59.000000'"),
                MIN_ROW.replace("'-838:59:59.999'", "'-838:59:59.000'"), NULL_ROW)
    return MAX_ROW, MIN_ROW, NULL_ROW


ZERO_ROW = ("4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0000-00-00', "
            "'00:00:00', '00:00:00.000', '00:00:00', '0000-00-00 00:00:00', "
            "'2024-00-10 10:00:00.5', '0000-00-00 00:00:00.000000', '0000-00-00 00:00:00', "
            "'0000-00-00 00:00:00.000000', ' ', 'a  ', 'tail  ', 'x', x'0100', x'00', "
            "'\\'\"\\\\', '\\n\\t', '', '', x'00', x'0000', x'', x'', 'b', 'y', "
            "'{\"a\": null, \"b\": true, \"c\": 1.5, \"d\": \"\\\\u00e9\"}', "
            "ST_GeomFromText('MULTIPOINT(1 1,2 2)'), ST_GeomFromText('POINT(1 1)')")


def _norm_select(name, v):
    """PyMySQL's value -> what our decoder yields for that column."""
    if isinstance(v, bytes) and name.startswith("b") and name[1:].isdigit():
        return int.from_bytes(v, "big")
    if name in ("g", "pt") and v is not None:
        return Geometry(int.from_bytes(v[:4], "little"), v[4:])
    if name == "s" and isinstance(v, set):
        return ",".join(x for x in ("x", "y", "z") if x in v)
    return v


def _norm_ours(name, v):
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    if name == "f" and isinstance(v, float):
        return v
    return v


def _close(name, a, b):
    if name == "f" and isinstance(a, float) and isinstance(b, float):
        return struct.unpack("<f", struct.pack("<f", b))[0] == a
    if isinstance(b, str) and isinstance(a, InvalidTemporal):
        return str(a) == b
    return a == b


def _select(conn, db, ids):
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(NAMES)} FROM `{db}`.m WHERE id IN ({', '.join(map(str, ids))}) "
                    f"ORDER BY id")
        return {row[0]: tuple(_norm_select(n, v) for n, v in zip(NAMES, row)) for row in cur.fetchall()}


def _assert_row(ours, theirs, what):
    assert len(ours) == len(theirs) == len(NAMES)
    for name, a, b in zip(NAMES, ours, theirs):
        a = _norm_ours(name, a)
        assert _close(name, a, b), f"{what}: column {name}: decoded {a!r:.200} != SELECT {b!r:.200}"


def fill_matrix(cur) -> None:
    """Creates the type matrix table ``m`` (in the cursor's database) with its four rows."""
    cur.execute("SET SESSION sql_mode = ''")
    cur.execute("SET SESSION time_zone = '+00:00'")
    cur.execute(f"CREATE TABLE m ({COLUMNS})")
    for row in (MAX_ROW, MIN_ROW, NULL_ROW, ZERO_ROW):
        cur.execute(f"INSERT INTO m VALUES ({row})")


@pytest.fixture
def matrix_binlogs(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        fill_matrix(cur)
    inserted = _select(conn, db, [1, 2, 3, 4])
    with conn.cursor() as cur:
        cur.execute("UPDATE m SET vc = CONCAT(vc, '✓'), dc = -dc, t6 = '-12:34:56.5', ts6 = "
                    "'2001-02-03 04:05:06.7', j = '{\"updated\": [1, 2]}', e = 'a', s = 'x,z' "
                    "WHERE id IN (1, 2, 4)")
    updated = _select(conn, db, [1, 2, 4])
    with conn.cursor() as cur:
        cur.execute("DELETE FROM m WHERE id IN (2, 3)")
    conn.close()
    files = binlog_snapshot(since_file=start_file)
    return db, files, inserted, updated


def _changes(files, db):
    out = []
    for tx in assemble(read_events(files)):
        out += [c for c in tx.changes() if c.schema == db and c.table == "m"]
    return out


def test_type_matrix_equals_select(matrix_binlogs):
    db, files, inserted, updated = matrix_binlogs
    changes = _changes(files, db)
    assert [c.op for c in changes] == ["c"] * 4 + ["u"] * 3 + ["d"] * 2
    for c in changes[:4]:
        _assert_row(c.after, inserted[c.after[0]], f"insert id={c.after[0]}")
    for c in changes[4:7]:
        _assert_row(c.before, inserted[c.before[0]], f"update before id={c.before[0]}")
        _assert_row(c.after, updated[c.after[0]], f"update after id={c.after[0]}")
    for c in changes[7:]:
        expected = updated.get(c.before[0]) or inserted[c.before[0]]
        _assert_row(c.before, expected, f"delete id={c.before[0]}")
    # a few values spelled out, so a wrong normalisation cannot hide a wrong decode
    max_row = changes[0].after
    row = dict(zip(NAMES, max_row))
    assert row["bu"] == 18446744073709551615 and row["tu"] == 255
    assert row["dc2"] == Decimal("99999999999999999999999999999999999.999999999999999999999999999999")
    assert row["t6"] == dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)
    assert row["vc"] == "😀" * 300 and row["c"] == "ééééééééé😀"
    assert row["b64"] == 2 ** 64 - 1 and row["b1"] == 1
    zero = dict(zip(NAMES, changes[3].after))
    assert zero["dd"] == "0000-00-00" and isinstance(zero["dd"], InvalidTemporal)
    assert zero["dtm1"] == "2024-00-10 10:00:00.5"
    assert zero["bn"] == b"\x01\x00\x00\x00"  # BINARY(4) padded back as SELECT shows it
    mn = dict(zip(NAMES, changes[1].after))
    assert mn["t6"] == -dt.timedelta(microseconds=1)
    assert mn["ts0"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)
    assert all(v is None for v in changes[2].after[1:])


def _reference_lines(files):
    out = subprocess.run(["mariadb-binlog", "--no-defaults", "-v", "--base64-output=decode-rows",
                          *map(str, files)], capture_output=True, check=True).stdout
    return [line.rstrip() for line in out.split(b"\n") if line.startswith(b"### ")]


def test_type_matrix_equals_mariadb_binlog(matrix_binlogs):
    db, files, _, _ = matrix_binlogs
    ours = []
    for ev in read_events(files):
        if isinstance(ev, RowsEvent):
            ours += [line.rstrip() for line in mysqlbinlog_rows(ev.kind, ev.table, ev.rows)]
    ref = _reference_lines(files)
    assert len(ours) == len(ref) > 9 * len(NAMES)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a == b, f"line {k}: ours {a[:200]!r} != mariadb-binlog {b[:200]!r}"


def test_minimal_row_image_marks_absent_columns(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(10), c INT)")
        cur.execute("INSERT INTO t VALUES (1, 10, 'x', NULL)")
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cur.execute("UPDATE t SET a = 11 WHERE id = 1")
        cur.execute("DELETE FROM t WHERE id = 1")
    conn.close()
    changes = [c for tx in assemble(read_events(binlog_snapshot(since_file=start_file)))
               for c in tx.changes() if c.schema == db]
    ins, upd, dele = changes
    assert ins.after == (1, 10, "x", None)
    assert upd.before == (1, ABSENT, ABSENT, ABSENT)
    assert upd.after == (ABSENT, 11, ABSENT, ABSENT)
    assert upd.image("after") == {"a": 11}
    assert dele.before == (1, ABSENT, ABSENT, ABSENT)
    assert dele.key() == {"id": 1}


def test_sixteen_megabyte_blob(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    payload = bytes(range(256)) * (16 * 4096)  # 16 MiB
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)")
        cur.execute("INSERT INTO big VALUES (1, %s)", (payload,))
    conn.close()
    (change,) = [c for tx in assemble(read_events(binlog_snapshot(since_file=start_file)))
                 for c in tx.changes() if c.schema == db]
    assert change.after[0] == 1 and len(change.after[1]) == 16 * 1024 * 1024
    assert change.after[1] == payload


def test_mariadb_compressed_events_decode_like_plain_ones(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL log_bin_compress = ON")
            cur.execute("SET GLOBAL log_bin_compress_min_len = 10")
        conn.close()
        conn = mariadb.connect(database=db)  # the setting is read at connect time
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE z (id INT PRIMARY KEY, v VARCHAR(2000))")
            cur.execute("INSERT INTO z VALUES (1, REPEAT('abc', 600)), (2, 'short')")
            cur.execute("UPDATE z SET v = REPEAT('xyz', 500) WHERE id = 1")
            cur.execute("DELETE FROM z WHERE id = 2")
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL log_bin_compress = OFF")
        conn.close()
    files = binlog_snapshot(since_file=start_file)
    types = {ev.type_code for ev in read_events(files)}
    assert types & {EventType.MARIA_QUERY_COMPRESSED} and \
        types & set(range(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, 172)), types
    changes = [c for tx in assemble(read_events(files)) for c in tx.changes() if c.schema == db]
    assert [(c.op, c.before, c.after) for c in changes] == [
        ("c", None, (1, "abc" * 600)), ("c", None, (2, "short")),
        ("u", (1, "abc" * 600), (1, "xyz" * 500)), ("d", (2, "short"), None)]
    ours = [l.rstrip() for ev in read_events(files) if isinstance(ev, RowsEvent)
            for l in mysqlbinlog_rows(ev.kind, ev.table, ev.rows)]
    assert ours == _reference_lines(files)
