"""DeltaUpserter's fast path (JSON images read by pyarrow's JSON reader, streaming.sinks.json_images)
gives exactly the last-change-per-key table of the per-value path, for random change sequences
(inserts, snapshot rows, updates that change the primary key, deletes), and steps aside where it
cannot read a value exactly."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.values.render import row_json  # noqa: E402
from cdc.values.types import ColumnDef  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo  # noqa: E402
from streaming.sinks.json_images import NotFast  # noqa: E402

UTF8MB4 = 45


def _col(i, name, code, meta, collation=None, unsigned=False):
    c = ColumnDef(i, code, meta, True)
    c.name, c.collation, c.unsigned = name, collation, unsigned
    return c


COLUMNS = [_col(0, "id", T.LONGLONG, None), _col(1, "amount", T.NEWDECIMAL, (12, 2)),
           _col(2, "big", T.LONGLONG, None, unsigned=True),
           _col(3, "note", T.VARCHAR, 160, UTF8MB4), _col(4, "created", T.DATETIME2, 3),
           _col(5, "ts", T.TIMESTAMP2, 6), _col(6, "day", T.DATE, None),
           _col(7, "f", T.FLOAT, 4), _col(8, "d", T.DOUBLE, 8), _col(9, "tiny", T.TINY, None)]
NAMES = [c.name for c in COLUMNS]


def _row(rnd, key):
    return (key, Decimal(rnd.randrange(-10**11, 10**11)).scaleb(-2),
            rnd.choice([0, 2**64 - 1, rnd.randrange(2**64)]),
            rnd.choice(["", "é😀", 'q"\\\n', "x" * 40, None]),
            dt.datetime(2024, 1, 1, 0, 0, 1, 123000) + dt.timedelta(seconds=rnd.randrange(10**8)),
            dt.datetime(2020, 5, 6, 7, 8, 9, rnd.randrange(10**6), tzinfo=dt.timezone.utc),
            dt.date(1000, 1, 1) + dt.timedelta(days=rnd.randrange(3 * 10**5)),
            rnd.choice([1.100000023841858, -0.0, 3.4028234663852886e38, None]),
            rnd.choice([1e300, -2.5e-308, 0.1, None]), rnd.randrange(-128, 128))


def _changes(seed: int, n: int) -> list:
    rnd = random.Random(seed)
    live: dict[int, tuple] = {}
    out = []
    for i in range(n):
        seq = "0000000001:%012d:%010d" % (i, 0)
        kind = rnd.random()
        if not live or kind < 0.35:
            k = rnd.randrange(50)
            row = _row(rnd, k)
            live[k] = row
            out.append((rnd.choice("cr"), None, row_json(NAMES, row), seq))
        elif kind < 0.8:
            k = rnd.choice(list(live))
            old = live.pop(k)
            new_key = k if rnd.random() < 0.7 else rnd.randrange(50, 80)
            row = _row(rnd, new_key)
            live[new_key] = row
            out.append(("u", row_json(NAMES, old), row_json(NAMES, row), seq))
        else:
            k = rnd.choice(list(live))
            out.append(("d", row_json(NAMES, live.pop(k)), None, seq))
    return out


def _upserter():
    return DeltaUpserter("/nonexistent", app_id="t",
                         columns=lambda db, table: TableInfo(COLUMNS, ["id"]))


def _rows(table) -> list:
    return sorted(table.to_pylist(), key=lambda r: (r["id"], r["_cdc_op"]))


@pytest.mark.parametrize("seed", range(12))
def test_fast_path_equals_the_per_value_path(seed):
    up = _upserter()
    tbl = up._table("db", "t")
    assert tbl.read_schema is not None
    changes = _changes(seed, 400)
    fast = up._last_changes_fast(tbl, changes)
    tbl.read_schema = None                          # the per-value path
    slow = up._last_changes("db", "t", changes, False)
    assert fast.schema == slow.schema
    assert _rows(fast) == _rows(slow)


@pytest.mark.parametrize("image, why", [
    ('{"id": 1, "day": "0000-00-00"}', "zero date"),
    ('{"id": 1, "note": {"$binary": "ww=="}}', "text not valid in its charset"),
    ('{"id": 1, "note": 3}', "a number in a text column"),
    ('{"id": 1, "amount": 1.005}', "more decimals than the column"),
])
def test_values_the_reader_cannot_take_exactly_go_the_per_value_way(image, why):
    up = _upserter()
    tbl = up._table("db", "t")
    full = row_json(NAMES, _row(random.Random(1), 1))
    with pytest.raises(NotFast):
        up._last_changes_fast(tbl, [("c", None, full, "1"), ("u", full, image, "2")])


def test_an_image_without_every_column_is_not_fast():
    """MINIMAL after images leave columns out: nulls there would overwrite values."""
    up = _upserter()
    tbl = up._table("db", "t")
    with pytest.raises(NotFast):
        up._last_changes_fast(tbl, [("u", '{"id": 1}', '{"id": 1, "note": "x"}', "1")])
