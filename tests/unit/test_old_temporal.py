"""Pre-5.6 TIME/TIMESTAMP/DATETIME of unknown precision (MariaDB binlogs read without the
server, :mod:`cdc.rows.old_temporal`): a rows event decodes as precision 0 only when no other
width reads it; otherwise a ParseError naming mysql56_temporal_format, never a wrong value.
Real servers: tests/live/test_old_temporal_files_live.py."""

from __future__ import annotations

import datetime as dt
import struct

import pytest

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.tablemap import TableMap
from cdc.errors import ParseError
from cdc.rows import old_temporal
from cdc.rows.decode import decode_images
from cdc.values.types import ColumnDef

UTC = dt.timezone.utc


def _tmap(*types, nullable=True):
    cols = []
    for i, t in enumerate(types):
        c = ColumnDef(i, t, 0 if t == T.LONG else None, nullable)
        c.name = f"c{i}"
        cols.append(c)
    return TableMap(7, 0, "db", "t", cols, [], False)


def _old_ts(secs: int) -> bytes:
    return struct.pack("<I", secs)


def _hires_ts(secs: int, frac: int, nbytes: int) -> bytes:
    return secs.to_bytes(4, "big") + frac.to_bytes(nbytes, "big")


@pytest.mark.parametrize("decoder", ["python", "c"])
def test_a_fraction_byte_that_reads_as_a_row_is_an_error(decoder):
    """(1, '2015-12-07 10:11:12.3') of TIMESTAMP(1): the fraction byte 3 reads as the NULL
    bitmap of a second row of NULLs at precision 0 -- and the event reads at width 5 too."""
    tm = _tmap(T.LONG, T.TIMESTAMP)
    secs = int(dt.datetime(2015, 12, 7, 10, 11, 12, tzinfo=UTC).timestamp())
    data = b"\x00" + struct.pack("<i", 1) + _hires_ts(secs, 3, 1)
    with pytest.raises(ParseError, match=r"TIMESTAMP.*column c1 of db\.t.*precision 0 and as "
                                         r"fractional seconds.*mysql56_temporal_format"):
        decode_images(tm, "insert", data, 0, (0, 1), None, decoder=decoder)
    assert tm.columns[1].meta is None


@pytest.mark.parametrize("decoder", ["python", "c"])
def test_precision_zero_decodes_when_nothing_else_fits(decoder):
    tm = _tmap(T.LONG, T.TIMESTAMP, T.TIME, T.DATETIME)
    rows = [(1, 1449483072, 101112, 20151207101112), (2, 0, -8385959, 0),
            (3, 2147483647, 8385959, 99991231235959)]
    data = b"".join(b"\x00" + struct.pack("<i", i) + _old_ts(s)
                    + t.to_bytes(3, "little", signed=True) + struct.pack("<Q", d)
                    for i, s, t, d in rows)
    got = decode_images(tm, "insert", data, 0, (0, 1, 2, 3), None, decoder=decoder)
    assert got[0] == (1, dt.datetime(2015, 12, 7, 10, 11, 12, tzinfo=UTC),
                      dt.timedelta(hours=10, minutes=11, seconds=12),
                      dt.datetime(2015, 12, 7, 10, 11, 12))
    assert len(got) == 3 and got[1][2] == -dt.timedelta(hours=838, minutes=59, seconds=59)
    assert [c.meta for c in tm.columns] == [0, 0, 0, 0]          # settled, for later events
    assert not tm.row_plans.unknown_precision


def test_a_column_that_is_null_stays_unknown():
    tm = _tmap(T.LONG, T.TIMESTAMP, T.TIME)
    data = b"\x04" + struct.pack("<i", 5) + _old_ts(1000)        # c2 NULL
    assert decode_images(tm, "insert", data, 0, (0, 1, 2), None) == [
        (5, dt.datetime(1970, 1, 1, 0, 16, 40, tzinfo=UTC), None)]
    assert [c.meta for c in tm.columns] == [0, 0, None]


def test_values_only_a_fraction_reads_are_an_error():
    """TIME(6) 10:11:12.5 (6 bytes) in a one-column table: no precision-0 reading fits."""
    tm = _tmap(T.TIME)
    zero = (838 * 3600 + 59 * 60 + 59 + 1) * 10 ** 6
    raw = ((10 * 3600 + 11 * 60 + 12) * 10 ** 6 + 500000 + zero).to_bytes(6, "big")
    with pytest.raises(ParseError, match="TIME.*fractional seconds.*mysql56_temporal_format"):
        decode_images(tm, "insert", b"\x00" + raw, 0, (0,), None)


def test_updates_are_read_in_pairs():
    tm = _tmap(T.LONG, T.DATETIME)
    img = lambda i, d: b"\x00" + struct.pack("<i", i) + struct.pack("<Q", d)   # noqa: E731
    data = img(1, 20240101000000) + img(2, 20240102000000)
    assert decode_images(tm, "update", data, 0, (0, 1), (0, 1)) == [
        ((1, dt.datetime(2024, 1, 1)), (2, dt.datetime(2024, 1, 2)))]


def test_too_many_readings_is_an_error(monkeypatch):
    monkeypatch.setattr(old_temporal, "SEARCH_BUDGET", 5)
    tm = _tmap(T.LONG, T.TIMESTAMP, T.TIMESTAMP)
    data = b"".join(b"\x00" + struct.pack("<i", i) + _old_ts(i) * 2 for i in range(4))
    with pytest.raises(ParseError, match="too many ways.*mysql56_temporal_format"):
        decode_images(tm, "insert", data, 0, (0, 1, 2), None)


def test_mysql_table_maps_have_precision_zero():
    """MySQL wrote no fractional seconds in these formats: its table maps say precision 0."""
    from support.binlog_builder import table_map_body
    from cdc.binlog.tablemap import decode_table_map

    body = table_map_body(7, "db", "t", bytes((T.TIMESTAMP, T.TIME, T.DATETIME)), b"", b"\x07")
    assert [c.meta for c in decode_table_map(body, 8, mariadb=False).columns] == [0, 0, 0]
    assert [c.meta for c in decode_table_map(body, 8, mariadb=True).columns] == [None] * 3
