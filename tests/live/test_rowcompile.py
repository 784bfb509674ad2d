"""The generated row readers (cdc.rows.compile) decode exactly what the generic per-column path
decodes, on the same events: NULLs, negative decimals, fractional and invalid datetimes,
strings in several character sets, blobs; and both reject truncated events the same way."""

import pytest

from cdc.binlog.events import RowsEvent
from cdc.binlog.files import read_events
from cdc.errors import TruncatedEventError
from cdc.rows.decode import ImageReader, count_images, decode_images
from cdc.values.kinds import ABSENT

pytestmark = pytest.mark.server

COLUMNS = """
 id BIGINT PRIMARY KEY, bu BIGINT UNSIGNED, i INT, iu INT UNSIGNED, mi MEDIUMINT, si SMALLINT,
 ti TINYINT, tu TINYINT UNSIGNED, f FLOAT, d DOUBLE,
 dc DECIMAL(12,2), dc9 DECIMAL(18,9), dc0 DECIMAL(5,0), dcs DECIMAL(4,4), dcb DECIMAL(30,10),
 dt0 DATETIME, dt1 DATETIME(1), dt3 DATETIME(3), dt6 DATETIME(6), ts6 TIMESTAMP(6) NULL,
 dd DATE, tm TIME(3), y YEAR,
 vc VARCHAR(40) CHARACTER SET utf8mb4, vl VARCHAR(300) CHARACTER SET utf8mb4,
 vlat VARCHAR(10) CHARACTER SET latin1, c CHAR(8) CHARACTER SET utf8mb4, bn BINARY(4),
 vb VARBINARY(300), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, bl BLOB, lb LONGBLOB,
 e ENUM('a','b'), s SET('x','y'), j JSON, b BIT(10)
"""
NCOLS = len([c for c in COLUMNS.replace("\n", " ").split(", ") if c.strip()])

ROWS = [
    "1, 18446744073709551615, -2147483648, 4294967295, -8388608, -32768, -128, 255, -1.5, "
    "-2.25e300, -1234567890.12, -123456789.123456789, -99999, -0.9999, "
    "-12345678901234567890.0123456789, '2024-02-29 23:59:59', '2024-02-29 23:59:59.9', "
    "'1000-01-01 00:00:00.001', '2024-01-01 00:00:00.000001', '2024-01-01 00:00:00.5', "
    "'2024-02-29', '-838:59:59.999', 2155, 'ééé😀', REPEAT('x', 300), 'ÿé', 'ab', x'01', "
    "x'00ff', 'tiny', 'text', 'medium', '{\"a\": 1}', x'0001', REPEAT(x'ab', 70000), 'b', 'x,y', "
    "'[1, 2.5, \"s\"]', b'1010101010'",
    "2, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.01, -0.000000001, 0, 0, 0, '0000-00-00 00:00:00', "
    "'2024-00-10 10:00:00.5', '0000-00-00 00:00:00.000', '1970-01-01 00:00:00.000000', "
    "'1970-01-01 00:00:01.000001', '0000-00-00', '00:00:00', 0, '', '', '', '', x'', x'', '', '', "
    "'', '', x'', x'', 'a', '', '{}', b'0'",
    "3" + ", NULL" * (NCOLS - 1),
    "4, 1, 2, 3, 4, 5, 6, 7, 8.5, 9.25, 99999.99, 0.5, 5, 0.1234, 1.5, '2023-06-15 12:34:56', "
    "'2023-06-15 12:34:56.7', '2023-06-15 12:34:56.789', '2023-06-15 12:34:56.789012', NULL, "
    "'2023-06-15', '12:34:56.789', 1999, NULL, 'v', 'l', 'c', x'ff', NULL, 't', NULL, 'm', 'l', "
    "NULL, x'00', 'b', 'y', NULL, b'1'",
]


@pytest.fixture(scope="module")
def events(mariadb, tmp_path_factory):
    db = "t_rowcompile"
    mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    mariadb.execute(f"CREATE DATABASE {db}")
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        cur.execute(f"CREATE TABLE m ({COLUMNS})")
        cur.execute("INSERT INTO m VALUES " + ", ".join(f"({r})" for r in ROWS))
        for k in range(5, 400):   # many rows in one event: the loop, not only one image
            cur.execute(f"INSERT INTO m (id, dc, dt6, vc) VALUES ({k}, {-k}.{k % 100:02d}, "
                        f"'2024-01-01 00:00:00.{k:06d}', 'r{k}')")
        cur.execute("UPDATE m SET dc = -dc, dt6 = '2001-02-03 04:05:06.7', vc = NULL WHERE id <= 4")
        cur.execute("UPDATE m SET dc = dc - 1, vc = 'ü' WHERE id > 4")
        cur.execute("DELETE FROM m WHERE id % 3 = 0")
    conn.commit()
    conn.close()
    mariadb.execute(f"DROP DATABASE {db}")
    files = mariadb.snapshot_binlogs(tmp_path_factory.mktemp("rowcompile"), since_file=start_file)
    evs = [e for e in read_events(files) if isinstance(e, RowsEvent) and e.table is not None
           and e.table.schema == db]
    assert {e.kind for e in evs} == {"insert", "update", "delete"}
    return evs


def _generic(ev):
    """The rows of *ev* through the per-column decoders only (no generated code)."""
    def reader(present):
        r = ImageReader(ev.table, present)
        r.fast = None
        return r.read

    data, pos, end = ev._data, ev._start, len(ev._data)
    read1 = reader(ev._present)
    rows = []
    if ev.kind != "update":
        while pos < end:
            row, pos = read1(data, pos)
            rows.append(row)
        return rows
    read2 = reader(ev._present_after)
    while pos < end:
        before, pos = read1(data, pos)
        after, pos = read2(data, pos)
        rows.append((before, after))
    return rows


def _fast(ev):
    return decode_images(ev.table, ev.kind, ev._data, ev._start, ev._present, ev._present_after)


def _typed(rows):
    """Values with their types and reprs (Decimal('1.0') == Decimal('1.00'), but not here)."""
    def one(row):
        return [(type(v).__name__, repr(v)) for v in row]
    return [[one(r) for r in row] if isinstance(row[0], tuple) else one(row) for row in rows]


def test_fast_path_equals_generic_path(events, row_decoder):
    nrows = 0
    for ev in events:
        fast, generic = _fast(ev), _generic(ev)
        assert _typed(fast) == _typed(generic)
        nrows += len(fast)
        # the generated loop (or the compiled decoder) ran: every image is full
        plans = ev.table.row_plans
        assert plans.c_plans if row_decoder == "c" else plans.batch_readers
    assert nrows > 500


def test_values_cover_the_interesting_cases(events):
    rows = [r for ev in events if ev.kind == "insert" for r in _fast(ev)]
    by_id = {r[0]: r for r in rows}
    one, two, nulls = by_id[1], by_id[2], by_id[3]
    assert str(one[10]) == "-1234567890.12" and str(two[10]) == "-0.01"
    assert str(two[11]) == "-1E-9"
    assert one[18].microsecond == 1 and one[17].microsecond == 1000
    assert isinstance(two[15], str) and two[15] == "0000-00-00 00:00:00"
    assert two[16] == "2024-00-10 10:00:00.5"
    assert one[23] == "ééé😀" and one[25] == "ÿé" and one[27] == b"\x01\x00\x00\x00"
    assert len(one[34]) == 70000
    assert nulls[1:] == (None,) * (NCOLS - 1)
    assert ABSENT not in one


def _count(ev):
    return count_images(ev.table, ev.kind, ev._data, ev._start, ev._present, ev._present_after)


def test_counting_rows_gives_the_number_decoded(events, row_decoder):
    """(The driver counts rows to bound a micro-batch: the compiled decoder walks the images
    without building them.)"""
    assert [_count(ev) for ev in events] == [len(_fast(ev)) for ev in events]
    assert sum(_count(ev) for ev in events) > 500


def test_truncated_events_fail_alike(events):
    ev = next(e for e in events if e.kind == "update" and len(e._data) < 20000)
    for cut in range(1, len(ev._data), 7):
        short = RowsEvent.__new__(RowsEvent)
        for name in ("kind", "table", "_start", "_present", "_present_after"):
            setattr(short, name, getattr(ev, name))
        short._data = ev._data[:cut]
        outcomes = []
        for fn in (lambda e: _typed(_fast(e)), lambda e: _typed(_generic(e)),
                   lambda e: len(_fast(e)), _count):
            try:
                outcomes.append(fn(short))
            except TruncatedEventError:
                outcomes.append("truncated")
        assert outcomes[0] == outcomes[1], cut
        assert outcomes[2] == outcomes[3], cut      # counting fails where decoding does


def test_generated_code_is_shared_by_table_maps_of_one_shape(events):
    readers = {id(ev.table): ev.table.full_row_reader for ev in events}
    assert len({r.__code__ for r in readers.values()}) == 1
    assert len({id(ev.table.row_plans.batch_reader(ev.kind == "update")) for ev in events}) == 2
    # caches stay per table map: they refer to it
    for ev in events:
        assert ev.table.row_plans.tmap is ev.table
        for reader in ev.table.row_plans.image_readers.values():
            assert reader.tmap is ev.table
