"""MariaDB's pre-5.6 temporal formats (``mysql56_temporal_format=OFF``) read from binlog files.

A TIMESTAMP(n)/TIME(n)/DATETIME(n) column is logged with the old type code and no precision:
the files do not say how many bytes its values take.  Decoded from the files alone, such a
column must decode to what the server's own SELECT returns or raise an error naming
``mysql56_temporal_format`` -- never a wrong value.  Before, a single-row event whose
fractional-second byte happened to read as a NULL bitmap decoded as two rows with a wrong date
(``(1, 2004-03-19 ...), (None, None)`` for ``(1, '2015-12-07 10:11:12.3')``).  Precision-0
columns of the old format (tables from MariaDB before 10.1.2, or with the setting OFF) still
decode from files; a live stream, which reads the precision from information_schema, decodes
all of them.
"""

from __future__ import annotations

import datetime as dt

import pytest

from cdc.binlog.events import RowsEvent, TableMapEvent
from cdc.binlog.files import read_events
from cdc.errors import ParseError
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig

pytestmark = [pytest.mark.server, pytest.mark.servers("mariadb-10.11", "mariadb-11.8")]

DB = "oldt"
VALUES = {"TIMESTAMP": "2015-12-07 10:11:12", "TIME": "10:11:12", "DATETIME": "2015-12-07 10:11:12"}
#: digits of the fraction: 3 and 7 set both low bits of a 1-byte fraction (read as a NULL
#: bitmap of two columns, both NULL), 1 and 5 only one
DIGITS = (1, 3, 5, 7)


def _tables():
    """(name, DDL of v, [SQL values], single column?) of every table of the workload."""
    out = []
    for kind, base in VALUES.items():
        null = " NULL" if kind == "TIMESTAMP" else ""
        for fsp in range(0, 7):
            ddl = f"{kind}({fsp}){null}"
            if fsp == 0:
                vals = [f"'{base}'", f"'{base.replace('10:11:12', '23:59:59')}'", "NULL"]
                if kind == "TIME":
                    vals += ["'-838:59:59'", "'838:59:59'", "'-00:00:01'"]
                out.append((f"{kind.lower()}0_multi", ddl, vals, False))
                for k, v in enumerate(vals):
                    out.append((f"{kind.lower()}0_{k}", ddl, [v], False))
                continue
            for digit in DIGITS:
                v = f"'{base}.{str(digit) * fsp}'"
                out.append((f"{kind.lower()}{fsp}_{digit}", ddl, [v], False))
                out.append((f"{kind.lower()}{fsp}_{digit}_alone", ddl, [v], True))
    return out


def _canon(v):
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat(sep=" ")
    if isinstance(v, dt.timedelta):
        sign = "-" if v < dt.timedelta(0) else ""
        us = abs(v) // dt.timedelta(microseconds=1)
        s, us = divmod(us, 1_000_000)
        return f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" + (f".{us:06d}" if us else "")
    return str(v)


def _canon_ref(text):
    """The server's CAST(v AS CHAR) text in _canon's form (fraction: 6 digits, or none)."""
    if text is None:
        return None
    head, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    return head + ("." + (frac + "000000")[:6] if frac else "")


@pytest.fixture
def old_files(server, mariadb_factory, tmp_path):
    s = mariadb_factory(extra_options={"mysql56_temporal_format": "OFF",
                                       "binlog_row_metadata": "NO_LOG"})
    conn = s.connect()
    cur = conn.cursor()
    cur.execute("SET SESSION time_zone = '+00:00'")
    cur.execute(f"CREATE DATABASE {DB}")
    cur.execute(f"USE {DB}")
    start = s.current_position()
    ref = {}
    for name, ddl, vals, alone in _tables():
        if alone:
            cur.execute(f"CREATE TABLE {name} (v {ddl})")
            cur.execute(f"INSERT INTO {name} VALUES " + ", ".join(f"({v})" for v in vals))
            cur.execute(f"SELECT CAST(v AS CHAR) FROM {name}")
            ref[name] = [(_canon_ref(r[0]),) for r in cur.fetchall()]
        else:
            cur.execute(f"CREATE TABLE {name} (id INT NOT NULL PRIMARY KEY, v {ddl})")
            cur.execute(f"INSERT INTO {name} VALUES " + ", ".join(
                f"({k + 1}, {v})" for k, v in enumerate(vals)))
            cur.execute(f"SELECT id, CAST(v AS CHAR) FROM {name} ORDER BY id")
            ref[name] = [(str(i), _canon_ref(t)) for i, t in cur.fetchall()]
    conn.close()
    files = s.snapshot_binlogs(tmp_path / "binlogs", since_file=start[0])
    return s, start, files, ref


def _decoded_per_table(events) -> dict:
    """{table: [row tuples in canonical form]} or {table: the ParseError}, per rows event."""
    out = {}
    for ev in events:
        if isinstance(ev, RowsEvent) and ev.table is not None and ev.table.schema == DB:
            name = ev.table.table
            try:
                rows = [tuple(_canon(v) for v in r) for r in ev.decode_rows()]
            except ParseError as e:
                out[name] = e
                continue
            if not isinstance(out.get(name), Exception):
                out.setdefault(name, []).extend(rows)
    return out


@pytest.mark.parametrize("decoder", ["python", "c"])
def test_files_decode_right_or_fail_naming_the_setting(old_files, decoder):
    pytest.importorskip("cdc.rows._rowdecode") if decoder == "c" else None
    _s, _start, files, ref = old_files
    got = _decoded_per_table(read_events(files, row_decoder=decoder))
    codes = {ev.table.table: [c.type for c in ev.table.columns] for ev in read_events(files)
             if isinstance(ev, TableMapEvent) and ev.table.schema == DB}
    assert codes["timestamp1_3"] == [3, 7] and codes["time6_7_alone"] == [11]   # old formats
    wrong, errors = [], 0
    for name, want in ref.items():
        g = got.get(name)
        if isinstance(g, ParseError):
            errors += 1
            if "mysql56_temporal_format" not in str(g):
                wrong.append(f"{name}: error without the setting: {g}")
            elif name.split("_")[0].endswith("0"):
                wrong.append(f"{name}: precision 0 must decode from files: {g}")
        elif g != want:
            wrong.append(f"{name}: decoded {g}, SELECT gives {want}")
    assert not wrong, f"{len(wrong)} tables:\n" + "\n".join(wrong)
    assert errors >= 3 * 6 * len(DIGITS)     # fractional seconds: not decodable from files alone


def test_a_live_stream_decodes_every_precision(old_files):
    s, start, _files, ref = old_files
    p = s.cdc_params()
    # today's information_schema: the tables are as they were written (no schema history needed)
    client = ReplicaClient(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                         schema_history=False),
                           start=Start.at(*start), blocking=False)
    got: dict = {}
    for tx in client.transactions():
        for c in tx.changes():
            if c.schema == DB:
                got.setdefault(c.table, []).append(tuple(_canon(v) for v in c.after))
    assert got == ref
