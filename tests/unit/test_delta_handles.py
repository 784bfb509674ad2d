"""DeltaUpserter keeps each Delta table's handle across batches (brought up to date in place,
not opened again): what another writer committed in between is seen (a batch it applied is
skipped, its rows are kept), a table removed in between is created again, and an unpickled
upserter starts without handles; the upserts go through the Arrow-compute last-change path
and give the same table as the per-value path."""

from __future__ import annotations

import pickle
import shutil

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.values.render import row_json  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo  # noqa: E402

from test_delta_fast_path import _changes, _col  # noqa: E402
from test_delta_fast_path import COLUMNS as WIDE  # noqa: E402

COLS = [_col(0, "id", T.LONG, None), _col(1, "v", T.VARCHAR, 40, 45)]


class _Columns:                                       # picklable, unlike a lambda
    def __init__(self, columns):
        self.columns = columns

    def __call__(self, db, table):
        return TableInfo(self.columns, ["id"])


def _up(root, columns=COLS):
    return DeltaUpserter(str(root), app_id="app", columns=_Columns(columns))


def _batch(changes, table="t") -> pa.Table:
    ops, befores, afters, seqs = zip(*changes) if changes else ((), (), (), ())
    n = len(ops)
    return pa.table({"op": pa.array(ops, pa.string()), "db": pa.array(["db"] * n, pa.string()),
                     "table": pa.array([table] * n, pa.string()),
                     "before": pa.array(befores, pa.string()),
                     "after": pa.array(afters, pa.string()), "seq": pa.array(seqs, pa.string())})


def _ins(i, v, seq):
    return ("c", None, row_json(["id", "v"], (i, v)), seq)


def _rows(root, table="t"):
    t = deltalake.DeltaTable(str(root / "db" / table)).to_pyarrow_table()
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_commits_of_another_writer_between_batches_are_seen(tmp_path):
    a, b = _up(tmp_path), _up(tmp_path)
    assert a.upsert_arrow(_batch([_ins(1, "a", "1")]), 0) == {"db.t": 1}
    assert b.upsert_arrow(_batch([_ins(2, "b", "2")]), 1) == {"db.t": 1}
    # a's kept handle is at batch 0; batch 1 is recorded by b: a must see it and skip
    assert a.upsert_arrow(_batch([_ins(3, "c", "3")]), 1) == {"db.t": 0}
    assert a.upsert_arrow(_batch([_ins(4, "d", "4")]), 2) == {"db.t": 1}
    assert _rows(tmp_path) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 4, "v": "d"}]


def test_a_table_removed_between_batches_is_created_again(tmp_path):
    a = _up(tmp_path)
    a.upsert_arrow(_batch([_ins(1, "a", "1")]), 0)
    shutil.rmtree(tmp_path / "db" / "t")
    assert a.upsert_arrow(_batch([_ins(2, "b", "2")]), 1) == {"db.t": 1}
    assert _rows(tmp_path) == [{"id": 2, "v": "b"}]


def test_pickled_state_has_no_handles(tmp_path):
    """(An upserter is pickled before use, by Spark Connect; the state drops the handles.)"""
    a = _up(tmp_path)
    a.upsert_arrow(_batch([_ins(1, "a", "1")]), 0)
    assert list(a._handles) == [str(tmp_path / "db" / "t")]
    assert a.__getstate__()["_handles"] == {}
    c = pickle.loads(pickle.dumps(_up(tmp_path)))
    assert c._handles == {}
    assert c.upsert_arrow(_batch([_ins(2, "b", "2")]), 1) == {"db.t": 1}
    assert _rows(tmp_path) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


@pytest.mark.parametrize("seed", range(4))
def test_upserts_equal_the_per_value_path(tmp_path, seed, monkeypatch):
    """Three batches of random changes (key changes, deletes), Arrow path vs per-value path
    (a table whose read_schema is None) into two roots: the same Delta rows."""
    import streaming.sinks.delta.upserter as delta
    used = []

    def spy(*a, **kw):
        out = last_changes(*a, **kw)                   # raises NotFast: the test fails
        used.append(out.num_rows)
        return out
    last_changes = delta.last_changes
    monkeypatch.setattr(delta, "last_changes", spy)
    fast, slow = _up(tmp_path / "f", WIDE), _up(tmp_path / "s", WIDE)
    slow._table("db", "t").read_schema = None
    changes = _changes(seed, 300)
    for k in range(3):
        part = _batch(changes[k * 100:(k + 1) * 100][::-1])    # out of seq order on purpose
        assert fast.upsert_arrow(part, k) == slow.upsert_arrow(part, k)
    got, want = _rows(tmp_path / "f"), _rows(tmp_path / "s")
    assert got == want and got
    assert len(used) == 3                              # every batch took the Arrow path


def _upd(i, old, new, seq, new_id=None):
    return ("u", row_json(["id", "v"], (i, old)),
            row_json(["id", "v"], (i if new_id is None else new_id, new)), seq)


def test_a_merge_reads_only_the_files_its_keys_can_be_in(tmp_path):
    """The MERGE's predicate carries the batch's key range: files of other keys are skipped
    (delta-rs's metrics), and rows in them are still matched when a change's key is there."""
    a = _up(tmp_path)
    for b in range(6):     # six files: ids 0-9, 10-19, ...
        a.upsert_arrow(_batch([_ins(10 * b + i, "x", f"{b}:{i}") for i in range(10)]), b)
    a.upsert_arrow(_batch([_ins(100, "new", "7")]), 6)
    metrics = deltalake.DeltaTable(str(tmp_path / "db" / "t")).history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_scanned"] == 0
    assert metrics["num_target_files_skipped_during_scan"] == 6
    # keys in old files: an update, a delete, and a key change into the deleted key
    a.upsert_arrow(_batch([_upd(12, "x", "y", "08"),
                           ("d", row_json(["id", "v"], (44, "x")), None, "09"),
                           _upd(13, "x", "z", "10", new_id=44)]), 7)
    metrics = deltalake.DeltaTable(str(tmp_path / "db" / "t")).history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_scanned"] == 4          # ids 10-49
    rows = {r["id"]: r["v"] for r in _rows(tmp_path)}
    assert (rows[12], rows[44], 13 in rows) == ("y", "z", False)
    assert len(rows) == 60 - 1 + 1
