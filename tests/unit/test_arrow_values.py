"""streaming.source.arrow_values builds what ``pa.array(values, type)`` builds (values, nulls,
types, the errors it raises), and a JSON envelope batch built in a fresh interpreter imports no
pandas (pyarrow's pandas check does, in ``pa.array``)."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from streaming.source.arrow_values import array, strings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STRINGS = [
    [],
    [""],
    ["a", "bc", ""],
    [None],
    [None, None, None],
    ["x", None, "", None, "yz"],
    ['{"a": "héllo"}', "😀", "ÿé", "plain", None, "q\"b\\\n\t\x00"],
    ["a" * 1000] * 9 + [None] * 7 + ["é" * 3],     # more than a bitmap byte
    tuple(["t", None, "u"]),
]


@pytest.mark.parametrize("values", STRINGS)
def test_strings_equal_pa_array(values):
    got = array(values, pa.string())
    want = pa.array(values, pa.string())
    assert got.type == pa.string()
    got.validate(full=True)
    assert got.equals(want)
    assert got.null_count == want.null_count
    assert got.to_pylist() == list(values)


@pytest.mark.parametrize("values", [[b"bytes", "str"], [1, "x"], ["\ud800"]])
def test_strings_pa_array_decides_what_is_not_str(values):
    assert strings(values) is None
    try:
        want = pa.array(values, pa.string())
    except Exception as e:          # the same error as pa.array's
        with pytest.raises(type(e)):
            array(values, pa.string())
    else:
        assert array(values, pa.string()).equals(want)


INTS = [
    (pa.int64(), []),
    (pa.int64(), [0, -1, 2 ** 63 - 1, -2 ** 63]),
    (pa.int64(), [None, 5, None]),
    (pa.int32(), [1, None, -2 ** 31, 2 ** 31 - 1] * 5),
    (pa.int32(), range(3, 20)),
    (pa.int8(), [127, -128, None]),
    (pa.int16(), (1, 2, None)),
    (pa.uint64(), [2 ** 64 - 1, 0, None]),
    (pa.uint8(), [255, 0]),
    (pa.int64(), [2.0, Decimal(3), None]),      # pa.array's conversions
]


@pytest.mark.parametrize("type,values", INTS)
def test_integers_equal_pa_array(type, values):
    got = array(values, type)
    want = pa.array(values, type)
    got.validate(full=True)
    assert got.type == type and got.equals(want) and got.null_count == want.null_count


@pytest.mark.parametrize("type,values", [(pa.int64(), [2 ** 63]), (pa.int32(), [2 ** 31]),
                                          (pa.uint8(), [-1]), (pa.int64(), [1.5]),
                                          (pa.int64(), ["4"]), (pa.int64(), [None, 2 ** 64])])
def test_integers_out_of_pa_array_ways_as_pa_array(type, values):
    """Out of range, floats, strings: what pa.array does (an error, or its conversion)."""
    try:
        want = pa.array(values, type)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        with pytest.raises((OverflowError, pa.ArrowInvalid, pa.ArrowTypeError)):
            array(values, type)
    else:
        assert array(values, type).equals(want)


def test_other_types_are_pa_array():
    assert array([1.5, None], pa.float64()).equals(pa.array([1.5, None], pa.float64()))
    assert array([b"x"], pa.binary()).equals(pa.array([b"x"], pa.binary()))


def test_a_json_batch_imports_no_pandas():
    """A Spark worker that builds the JSON envelope (BatchBuilder.flush) never imports pandas:
    the batch of a transaction with an insert, an update and a delete, built in a fresh
    interpreter."""
    code = """
import sys
from types import SimpleNamespace as NS
from streaming.contract.spark_schema import JSON_SCHEMA
from streaming.source.batches import BatchBuilder
from cdc.values.types import ColumnDef
from cdc.binlog.constants import ColumnType as T
cols = [ColumnDef(0, T.LONGLONG, 0, False), ColumnDef(1, T.VARCHAR, 60, True)]
for c, name in zip(cols, ("id", "v")):
    c.name, c.collation = name, 45
class Tmap:
    schema, table, columns, column_names, primary_key = "d", "t", cols, ["id", "v"], [0]
    full_row_reader = None
tmap = Tmap()
def ev(kind, rows):
    return NS(kind=kind, table=tmap, present=[0, 1], present_after=[0, 1], partial=False,
              decode_rows=lambda: rows)
tx = NS(file="mysql-bin.000001", pos=4, gtid=None, xid=7, server_id=1, timestamp=1700000000,
        tables_by_name={}, rows_events=[ev("insert", [(1, "é")]), ev("update", [((1, "é"), (1, "b"))]),
                                        ev("delete", [(1, "b")])])
b = BatchBuilder(JSON_SCHEMA)
b.add_transaction(tx)
batch = b.flush()
assert batch.num_rows == 3, batch
assert batch.column("op").to_pylist() == ["c", "u", "d"]
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
