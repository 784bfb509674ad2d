"""The snapshot's JSON images of DATETIME/TIMESTAMP columns whose values all print the same
fraction digits, none zero (streaming.source.snapshot_columns: quotes and padding as literals of
the row's one join) equal the exact path's texts (row_converter -> compile_json_renderer), on
rows a real server sent, every precision, NULLs, and batches where a zero fraction sends the
column to the general form."""

from __future__ import annotations

import sys

import pytest

from cdc.replica.config import ReplicaConfig
from cdc.replica.metadata import read_columns
from cdc.replica.sql import fetch_rows
from cdc.snapshot.reader import CLIENTS, connect_for_snapshot
from cdc.snapshot.values import row_converter, select_list
from cdc.values.render import compile_json_renderer

pa = pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.server, pytest.mark.servers()]

FSP = range(7)


def _value(f: int, row: int, zero: bool = False) -> str:
    frac = "" if not f else "." + ("0" * f if zero else str(row % 9 + 1) * f)
    return f"'20{10 + row % 20}-0{row % 9 + 1}-1{row % 9} 1{row % 10}:2{row % 10}:3{row % 10}{frac}'"


def _rows(server, db: str, client: str):
    cols = ", ".join(f"dtm_{f} DATETIME({f}), ts_{f} TIMESTAMP({f}) NULL" for f in FSP)
    server.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {cols})", database=db)
    values = []
    for row in range(40):
        zero = row >= 30          # the last rows: a zero fraction in every column
        parts = [str(row)]
        for f in FSP:
            parts += [_value(f, row, zero), "NULL" if row % 4 == 1 else _value(f, row + 3, zero)]
        values.append("(" + ", ".join(parts) + ")")
    server.execute("INSERT INTO t VALUES " + ", ".join(values),
                   database=db)
    plain = server.connect()
    try:
        defs = [c.column_def(i) for i, c in enumerate(
            read_columns(lambda sql, args: fetch_rows(plain, sql, args), db, "t"))]
    finally:
        plain.close()
    p = server.cdc_params()
    conn = connect_for_snapshot(ReplicaConfig(p["host"], p["port"], p["user"], p["password"]),
                                client)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {select_list(defs)} FROM `{db}`.t ORDER BY id")
            return defs, list(cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_uniform_fraction_datetimes_equal_the_exact_path(server, db, client):
    from streaming.source import snapshot_columns as sc
    if client == "mysqlclient":
        pytest.importorskip("MySQLdb")
    defs, raw = _rows(server, db, client)
    names = [c.name for c in defs]
    want = compile_json_renderer(defs, names)(list(map(row_converter(defs), raw)))
    images = sc.JsonImages(defs, names, [0])
    uniform = raw[:30]
    assert images.images(uniform)[0].to_pylist() == want[:30]
    assert images.images(raw)[0].to_pylist() == want
    got = [t for k in range(0, len(raw), 4) for t in images.images(raw[k:k + 4])[0].to_pylist()]
    assert got == want
    # not vacuous: the literal form rendered the columns without NULLs (the padding a literal),
    # the zero fractions the general form (fraction dropped)
    import pyarrow.compute as pc
    for i, c in enumerate(defs[1:], 1):
        if sys.version_info < (3, 11) and c.meta not in (0, 3, 6):
            continue      # Python 3.10's fromisoformat: 3 or 6 fraction digits, the exact path
        values = [r[i] for r in uniform]
        parts = sc._fast_parts(c, pa.array(values, pa.binary()))
        if None not in values:
            zone = "Z" if c.name.startswith("ts") else ""
            assert (parts.open, parts.close) == ('"', "0" * (6 - c.meta if c.meta else 0) + zone + '"'), c.name
        zeros = sc._fast_parts(c, pa.array([r[i] for r in raw[30:]], pa.binary()))
        assert not pc.any(pc.match_substring(zeros.text, ".")).as_py(), c.name
