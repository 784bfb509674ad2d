"""streaming.sinks.delta.last_change (the last change per key in Arrow compute) gives the same table, row
for row and in the same order, as the dict walk it replaces (DeltaUpserter._last_changes_fast,
itself checked against the per-value path in test_delta_fast_path), for random change sequences
with key changes, deletes and re-inserts, on a one-column and a two-column key; and
json_images.read_images reads an Arrow string array (sliced too) as it reads the list."""

from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from cdc.binlog.constants import ColumnType as T  # noqa: E402
from cdc.values.render import row_json  # noqa: E402
from streaming.sinks.delta.upserter import OP_COLUMN, DeltaUpserter, TableInfo  # noqa: E402
from streaming.sinks.json_images import NotFast, read_images  # noqa: E402
from streaming.sinks.delta.last_change import last_changes, last_changes_typed  # noqa: E402

from test_delta_fast_path import COLUMNS, NAMES, _changes, _col, _row  # noqa: E402


def _arrow(changes):
    ops, befores, afters, _seqs = zip(*changes)
    return (pa.array(ops, pa.string()), pa.array(befores, pa.string()),
            pa.array(afters, pa.string()))


def _table(columns, primary_key):
    """An upserter that knows one table ``db.t`` of *columns*, and that table's state."""
    up = DeltaUpserter("/nonexistent", app_id="t",
                       columns=lambda db, table: TableInfo(columns, primary_key))
    return up, up._table("db", "t")


def _vectorised(tbl, changes):
    return last_changes(*_arrow(changes), tbl.schema, tbl.read_schema, tbl.names,
                        tbl.primary_key, OP_COLUMN)


@pytest.mark.parametrize("seed", range(16))
def test_same_table_as_the_dict_walk(seed):
    up, tbl = _table(COLUMNS, ["id"])
    changes = _changes(seed, 300)
    new = _vectorised(tbl, changes)
    old = up._last_changes_fast(tbl, changes)
    assert new.schema == old.schema
    assert new.to_pylist() == old.to_pylist()         # same rows in the same order
    assert new.num_rows == len({r["id"] for r in new.to_pylist()})


KCOLS = [_col(0, "a", T.LONG, None), _col(1, "b", T.VARCHAR, 40, 45), _col(2, "v", T.LONG, None)]
KNAMES = [c.name for c in KCOLS]


def _composite(seed, n):
    """Changes of a table keyed (a, b): few distinct keys, so keys move onto each other."""
    rnd = random.Random(seed)
    live, out = {}, []
    for i in range(n):
        seq = "%012d" % i
        r = rnd.random()
        if not live or r < 0.3:
            k = (rnd.randrange(4), rnd.choice("xy"))
            live[k] = k + (i,)
            out.append(("c", None, row_json(KNAMES, live[k]), seq))
        elif r < 0.8:
            k = rnd.choice(list(live))
            old = live.pop(k)
            nk = k if rnd.random() < 0.5 else (rnd.randrange(4), rnd.choice("xyz"))
            live[nk] = nk + (i,)
            out.append(("u", row_json(KNAMES, old), row_json(KNAMES, live[nk]), seq))
        else:
            k = rnd.choice(list(live))
            out.append(("d", row_json(KNAMES, live.pop(k)), None, seq))
    return out


@pytest.mark.parametrize("seed", range(16))
def test_composite_key_same_as_the_dict_walk_and_the_per_value_path(seed):
    up, tbl = _table(KCOLS, ["a", "b"])
    changes = _composite(seed, 60)
    new = _vectorised(tbl, changes)
    assert new.to_pylist() == up._last_changes_fast(tbl, changes).to_pylist()
    tbl.read_schema, keep = None, tbl.read_schema
    slow = up._last_changes("db", "t", changes, False)
    key = lambda r: (r["a"], r["b"])                  # noqa: E731
    assert sorted(new.to_pylist(), key=key) == sorted(slow.to_pylist(), key=key)
    tbl.read_schema = keep


def test_a_key_moved_away_then_back_in_one_batch():
    up, tbl = _table(KCOLS, ["a", "b"])
    j = lambda *r: row_json(KNAMES, r)                # noqa: E731
    changes = [("c", None, j(1, "x", 1), "1"), ("u", j(1, "x", 1), j(2, "x", 2), "2"),
               ("u", j(2, "x", 2), j(1, "x", 3), "3")]
    got = {(r["a"], r["b"]): (r[OP_COLUMN], r["v"]) for r in _vectorised(tbl, changes).to_pylist()}
    assert got == {(1, "x"): ("u", 3), (2, "x"): ("d", 2)}


def test_a_delete_without_before_image_is_not_fast():
    up, tbl = _table(KCOLS, ["a", "b"])
    with pytest.raises(NotFast):
        _vectorised(tbl, [("d", None, None, "1")])


def test_read_images_takes_a_sliced_arrow_array_like_the_list():
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(3)
    texts = [row_json(NAMES, _row(rnd, k)) for k in range(20)]
    arr = pa.array(texts, pa.string()).slice(5, 10)
    got = read_images(arr, tbl.schema, tbl.read_schema, tbl.names)
    assert got.equals(read_images(texts[5:15], tbl.schema, tbl.read_schema, tbl.names))
    assert got.column("id").to_pylist() == list(range(5, 15))


@pytest.mark.parametrize("arrow", [False, True])
def test_read_images_tells_an_absent_needed_column_from_a_null_value(arrow):
    """A needed column that is null in the parsed table is looked up in that row's text: an
    explicit ``null`` is read, an absent column is :class:`NotFast`, wherever the row is."""
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(5)
    rows = [_row(rnd, k) for k in range(30)]
    texts = [row_json(NAMES, r) for r in rows]
    nullable = next(n for n in NAMES if n != "id")
    at = NAMES.index(nullable)
    for k in (3, 17):                       # explicit nulls: read as null
        rows[k] = tuple(None if i == at else v for i, v in enumerate(rows[k]))
        texts[k] = row_json(NAMES, rows[k])

    def read(t):
        src = pa.array([""] * 4 + t, pa.string()).slice(4) if arrow else t
        return read_images(src, tbl.schema, tbl.read_schema, tbl.names)
    got = read(texts)
    assert got.column(nullable).to_pylist()[3] is None
    assert got.equals(read_images(texts, tbl.schema, tbl.read_schema, []))
    for k in (0, 17, 29):                   # the column absent from one image: not fast
        lacking = list(texts)
        lacking[k] = row_json([n for n in NAMES if n != nullable],
                              tuple(v for i, v in enumerate(rows[k]) if i != at))
        with pytest.raises(NotFast):
            read(lacking)


def test_by_table_splits_in_order_of_appearance_and_sorts_each_by_seq_stably():
    from streaming.sinks.delta.last_change import by_table, last_truncate
    rows = [("db", "b", "3", "x"), ("db", "a", "2", "y"), ("db", "b", "1", "z"),
            ("db2", "a", "5", "w"), ("db", "a", "2", "v"), ("db", "a", "0", "u")]
    t = pa.table({k: pa.array(v, pa.string()) for k, v in
                  zip(["db", "table", "seq", "op"], zip(*rows))})
    got = [(key, part.column("seq").to_pylist(), part.column("op").to_pylist())
           for key, part in by_table(t)]
    assert got == [(("db", "b"), ["1", "3"], ["z", "x"]),
                   (("db", "a"), ["0", "2", "2"], ["u", "y", "v"]),   # equal seqs keep order
                   (("db2", "a"), ["5"], ["w"])]
    ops = pa.table({"op": pa.array(["c", "t", "u", "t", "d", None], pa.string())})
    assert last_truncate(ops) == 3
    assert last_truncate(ops.slice(4)) is None


# --- typed-mode images (option table=db.t): struct columns, no JSON ---------------------------


def _structs(tbl, texts):
    """Typed-mode images of the JSON *texts* (None: no image): a struct array."""
    rows = [t for t in texts if t is not None]
    table = read_images(rows, tbl.schema, tbl.read_schema, [])
    it = iter(range(len(rows)))
    take = pa.array([None if t is None else next(it) for t in texts], pa.int64())
    children = [table.column(i).combine_chunks().take(take) for i in range(table.num_columns)]
    return pa.StructArray.from_arrays(children, fields=list(tbl.schema),
                                      mask=pa.array([t is None for t in texts]))


@pytest.mark.parametrize("seed", range(12))
def test_typed_images_same_as_the_per_value_typed_path(seed):
    up, tbl = _table(COLUMNS, ["id"])
    changes = _changes(seed, 300)
    ops, befores, afters, seqs = zip(*changes)
    b, a = _structs(tbl, befores), _structs(tbl, afters)
    new = last_changes_typed(pa.array(ops), b, a, tbl.schema, tbl.primary_key, OP_COLUMN,
                             tbl.typed_arrow_conv)
    slow = up._last_changes("db", "t", list(zip(ops, b.to_pylist(), a.to_pylist(), seqs)), True,
                            fast=False)
    assert new.schema == slow.schema
    key = lambda r: r["id"]                           # noqa: E731 (order is the walk's own)
    assert sorted(new.to_pylist(), key=key) == sorted(slow.to_pylist(), key=key)
    # and the same rows, in the same order, as the JSON images give
    assert new.to_pylist() == _vectorised(tbl, changes).to_pylist()


def test_typed_time_columns_become_their_text_and_other_fields_are_not_fast():
    import datetime as dt
    cols = [_col(0, "id", T.LONG, None), _col(1, "t", T.TIME2, 6)]
    up, tbl = _table(cols, ["id"])
    assert tbl.schema.field("t").type == pa.string()          # Delta has no interval type
    fields = [pa.field("id", pa.int32()), pa.field("t", pa.duration("us"))]
    after = pa.StructArray.from_arrays(
        [pa.array([1, 2, 1], pa.int32()),
         pa.array([dt.timedelta(hours=-838, seconds=-1), dt.timedelta(microseconds=5), None],
                  pa.duration("us"))], fields=fields)
    ops = pa.array(["c", "c", "u"])
    before = pa.StructArray.from_arrays([pa.array([None, None, 1], pa.int32()),
                                         pa.array([None] * 3, pa.duration("us"))],
                                        fields=fields, mask=pa.array([True, True, False]))
    got = last_changes_typed(ops, before, after, tbl.schema, tbl.primary_key, OP_COLUMN,
                             tbl.typed_arrow_conv).to_pylist()
    assert got == [{"id": 2, "t": "00:00:00.000005", OP_COLUMN: "c"},
                   {"id": 1, "t": None, OP_COLUMN: "u"}]
    other = pa.StructArray.from_arrays(after.flatten(), names=["id", "renamed"])
    with pytest.raises(NotFast):
        last_changes_typed(ops, before, other, tbl.schema, tbl.primary_key, OP_COLUMN,
                           tbl.typed_arrow_conv)


@pytest.mark.parametrize("dupes", [False, True])
def test_insert_only_batches_equal_the_full_walk(dupes, monkeypatch):
    """Inserts and snapshot rows only (a bulk load, a snapshot chunk) take a shortcut when
    their keys are distinct; with a key twice (a row read by a chunk and inserted in its
    window) they do not. Either way: the full candidate walk's table, in the same order."""
    import streaming.sinks.delta.last_change as lc
    up, tbl = _table(KCOLS, ["a", "b"])
    rnd = random.Random(7)
    keys = [(i // 3, "xyz"[i % 3]) for i in range(60)]
    if dupes:
        keys[40] = keys[5]
    changes = [(rnd.choice("cr"), None, row_json(KNAMES, k + (i,)), "%04d" % i)
               for i, k in enumerate(keys)]
    ops, befores, afters, _ = zip(*changes)
    got_json = _vectorised(tbl, changes)
    b, a = _structs(tbl, befores), _structs(tbl, afters)
    typed = lambda: last_changes_typed(pa.array(ops), b, a, tbl.schema,  # noqa: E731
                                          tbl.primary_key, OP_COLUMN)
    got_typed = typed()
    assert lc._unique(read_images(list(afters), tbl.schema, tbl.read_schema, []),
                      tbl.primary_key) is not dupes
    monkeypatch.setattr(lc, "_unique", lambda *a: False)        # the full walk
    want = _vectorised(tbl, changes)
    assert got_json.to_pylist() == want.to_pylist() == typed().to_pylist() \
        == got_typed.to_pylist()
    assert want.num_rows == 59 if dupes else 60
    if dupes:
        assert {r["v"] for r in want.to_pylist() if (r["a"], r["b"]) == keys[5]} == {40}
