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


def _merged(table, key=("id",)):
    """The rows of a last-changes table as the MERGE reads them: a delete by its key only (the
    other columns of a key an update moved away from are not read)."""
    return [{k: v for k, v in r.items() if k in key or k == OP_COLUMN} if r[OP_COLUMN] == "d"
            else r for r in table.to_pylist()]


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
    assert _merged(new) == _merged(old)               # same rows in the same order
    assert new.num_rows == len({r["id"] for r in new.to_pylist()})


KCOLS = [_col(0, "a", T.LONG, None), _col(1, "b", T.VARCHAR, 40, 45), _col(2, "v", T.LONG, None)]
KNAMES = [c.name for c in KCOLS]
KEY = ("a", "b")


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
    assert _merged(new, KEY) == _merged(up._last_changes_fast(tbl, changes), KEY)
    tbl.read_schema, keep = None, tbl.read_schema
    slow = up._last_changes("db", "t", changes, False)
    key = lambda r: (r["a"], r["b"])                  # noqa: E731
    assert sorted(_merged(new, KEY), key=key) == sorted(_merged(slow, KEY), key=key)
    tbl.read_schema = keep


def test_a_key_moved_away_then_back_in_one_batch():
    up, tbl = _table(KCOLS, ["a", "b"])
    j = lambda *r: row_json(KNAMES, r)                # noqa: E731
    changes = [("c", None, j(1, "x", 1), "1"), ("u", j(1, "x", 1), j(2, "x", 2), "2"),
               ("u", j(2, "x", 2), j(1, "x", 3), "3")]
    got = {(r["a"], r["b"]): (r[OP_COLUMN], r.get("v")) for r in _merged(_vectorised(tbl, changes),
                                                                         KEY)}
    assert got == {(1, "x"): ("u", 3), (2, "x"): ("d", None)}


def test_a_delete_without_before_image_is_not_fast():
    up, tbl = _table(KCOLS, ["a", "b"])
    with pytest.raises(NotFast):
        _vectorised(tbl, [("d", None, None, "1")])


def test_read_images_takes_a_sliced_arrow_array_like_the_list():
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(3)
    texts = [row_json(NAMES, _row(rnd, k), COLUMNS) for k in range(20)]
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
    texts = [row_json(NAMES, r, COLUMNS) for r in rows]
    nullable = next(n for n in NAMES if n != "id")
    at = NAMES.index(nullable)
    for k in (3, 17):                       # explicit nulls: read as null
        rows[k] = tuple(None if i == at else v for i, v in enumerate(rows[k]))
        texts[k] = row_json(NAMES, rows[k], COLUMNS)

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
    rows = [("db", "b", "3", "u"), ("db", "a", "2", "c"), ("db", "b", "1", "c"),
            ("db2", "a", "5", "d"), ("db", "a", "2", "d"), ("db", "a", "0", "t")]
    t = pa.table({k: pa.array(v, pa.string()) for k, v in
                  zip(["db", "table", "seq", "op"], zip(*rows))})
    got = [(key, part.column("seq").to_pylist(), part.column("op").to_pylist(), in_order)
           for key, part, in_order in by_table(t)]
    assert got == [(("db", "b"), ["1", "3"], ["c", "u"], True),
                   (("db", "a"), ["0", "2", "2"], ["t", "c", "d"], True),   # equal seqs keep order
                   (("db2", "a"), ["5"], ["d"], True)]
    ops = pa.table({"op": pa.array(["c", "t", "u", "t", "d", None], pa.string())})
    assert last_truncate(ops) == 3
    assert last_truncate(ops.slice(4)) is None


def test_by_table_leaves_inserts_out_of_seq_order_as_they_came():
    """Inserts and snapshot rows only (a snapshot's chunks, whose seqs restart with each
    chunk) are not sorted: in_order tells the last-change step to order them where keys
    repeat."""
    from streaming.sinks.delta.last_change import by_table
    seqs = ["0:1", "0:2", "0:1", "0:2", "0:3"]
    t = pa.table({"db": ["d"] * 5, "table": ["t"] * 5, "seq": seqs,
                  "op": ["r", "r", "r", "c", "r"]})
    [(key, part, in_order)] = by_table(t)
    assert (key, part.column("seq").to_pylist(), in_order) == (("d", "t"), seqs, False)
    [(_, part, in_order)] = by_table(t.slice(0, 2))
    assert in_order and part.column("seq").to_pylist() == seqs[:2]


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
    assert _merged(new) == _merged(_vectorised(tbl, changes))


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


# --- the shortcuts: each gives the full walk's (or the per-value path's) table ------------------


def _walk(tbl, changes, monkeypatch):
    """The full candidate walk over *changes* in seq order (no shortcut)."""
    import streaming.sinks.delta.last_change as lc
    ordered = sorted(changes, key=lambda c: c[3])        # stable, like the upserter's sort
    with monkeypatch.context() as m:
        m.setattr(lc, "_unique", lambda *a: False)
        return _vectorised(tbl, ordered)


@pytest.mark.parametrize("dupes", [False, True])
@pytest.mark.parametrize("typed", [False, True])
def test_snapshot_chunks_out_of_seq_order_equal_the_sorted_walk(dupes, typed, monkeypatch):
    """A snapshot's chunks come in one batch with seqs that restart with each chunk (rows of
    different chunks share seqs): by_table leaves them as they came, and the last change per
    key is the sorted walk's -- a key read by two chunks (dupes) keeps the later seq's row."""
    from streaming.sinks.delta.last_change import by_table
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(11)
    chunks = [[_row(rnd, 10 * c + k) for k in range(7)] for c in range(4)]
    if dupes:
        chunks[0][3] = _row(rnd, 10 * 2 + 5)             # also in chunk 2, at a lower row
    changes = [("r", None, row_json(NAMES, r, COLUMNS), "0000000001:000000000004:%010d" % k)
               for chunk in chunks for k, r in enumerate(chunk)]
    ops, befores, afters, seqs = zip(*changes)
    after = (pa.chunked_array([pa.array(afters[i:i + 7], pa.string()) for i in range(0, 28, 7)])
             if not typed else _structs(tbl, afters))
    before = pa.array(befores, after.type)
    batch = pa.table({"op": ops, "db": ["db"] * 28, "table": ["t"] * 28, "before": before,
                      "after": after, "seq": seqs})
    [(_, part, in_order)] = by_table(batch)
    assert not in_order and part.column("seq").to_pylist() == list(seqs)
    got = up._last_changes_of("db", "t", part, typed, in_order)
    want = _walk(tbl, changes, monkeypatch)
    key = lambda r: r["id"]                              # noqa: E731
    assert got.schema == want.schema
    assert sorted(got.to_pylist(), key=key) == sorted(want.to_pylist(), key=key)
    assert got.num_rows == (27 if dupes else 28)
    if dupes:   # seq ...:0000000005 of chunk 2 is after ...:0000000003 of chunk 0
        assert [r["note"] for r in got.to_pylist() if r["id"] == 25] == [chunks[2][5][3]]


@pytest.mark.parametrize("moved", [0, 1, 5])
@pytest.mark.parametrize("typed", [False, True])
def test_update_batches_equal_the_walk_and_the_per_value_path(moved, typed, monkeypatch):
    """An UPDATE of many rows (no deletes in the batch): with no key changed, each update is
    its key's last change (the shortcut); with keys moved, the walk. Before images are read
    for their keys only; the table is the per-value path's as the MERGE reads it."""
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(moved)
    old = {k: _row(rnd, k) for k in range(40)}
    changes = [("c", None, row_json(NAMES, old[39], COLUMNS),
                "0000000001:000000000001:0000000000")]
    for i, k in enumerate(range(39)):
        new_key = 100 + k if k < moved else k
        new = (new_key,) + _row(rnd, new_key)[1:]
        changes.append(("u", row_json(NAMES, old[k], COLUMNS), row_json(NAMES, new, COLUMNS),
                        "0000000001:000000000002:%010d" % i))
    ops, befores, afters, seqs = zip(*changes)
    if typed:
        b, a = _structs(tbl, befores), _structs(tbl, afters)
        got = last_changes_typed(pa.array(ops), b, a, tbl.schema, tbl.primary_key, OP_COLUMN,
                                 tbl.typed_arrow_conv)
    else:
        got = _vectorised(tbl, changes)
    assert _merged(got) == _merged(_walk(tbl, changes, monkeypatch))
    slow = up._last_changes("db", "t", list(changes), False, fast=False)
    key = lambda r: r["id"]                              # noqa: E731
    assert sorted(_merged(got), key=key) == sorted(_merged(slow), key=key)
    assert got.num_rows == 40 + moved
    assert sorted(r["id"] for r in got.to_pylist() if r[OP_COLUMN] == "d") == list(range(moved))


def test_ascending_keys_tell_distinct_keys_like_a_group_by():
    """The strictly-ascending check that spares the hash of distinct keys: true only for
    distinct keys; repeated, descending or null keys go to the group-by, which decides."""
    from streaming.sinks.delta.last_change import _ascending, _unique
    t = pa.table({"a": [1, 1, 2, 2, None], "b": ["x", "y", "x", "y", "x"]})
    assert _ascending(t.slice(0, 4), ["a", "b"]) and _unique(t.slice(0, 4), ["a", "b"])
    assert not _ascending(t, ["a", "b"]) and _unique(t, ["a", "b"])      # a null: group-by
    assert not _ascending(t.slice(0, 4), ["a"]) and not _unique(t.slice(0, 4), ["a"])
    swapped = t.slice(0, 4).take([1, 0, 2, 3])
    assert not _ascending(swapped, ["a", "b"]) and _unique(swapped, ["a", "b"])
    same = pa.table({"a": [1, 2, 2]})
    assert not _ascending(same, ["a"]) and not _unique(same, ["a"])
    chunked = pa.table({"a": pa.chunked_array([[1, 2], [3], [3, 4]])})
    assert not _unique(chunked, ["a"]) and _unique(chunked.slice(0, 3), ["a"])


def test_read_images_of_chunks_with_offsets_and_an_image_of_two_objects():
    """Chunked (and sliced) texts are read as they lie, back to back; a text that holds two
    objects does not pass for two images."""
    up, tbl = _table(COLUMNS, ["id"])
    rnd = random.Random(9)
    texts = [row_json(NAMES, _row(rnd, k), COLUMNS) for k in range(12)]
    arr = pa.chunked_array([pa.array(texts[:5]).slice(2), pa.array(texts[5:]).slice(0, 6)])
    got = read_images(arr, tbl.schema, tbl.read_schema, tbl.names)
    assert got.equals(read_images(texts[2:11], tbl.schema, tbl.read_schema, tbl.names))
    two = pa.array([texts[0] + texts[1], texts[2]], pa.string())
    with pytest.raises(NotFast):
        read_images(two, tbl.schema, tbl.read_schema, tbl.names)


def test_typed_time_texts_equal_time_text_value_for_value():
    """Typed mode's TIME columns become their text in Arrow compute, as time_text writes it:
    the sign, hours past 24, the fraction only when there is one; nulls stay null."""
    import datetime as dt
    from cdc.values.render import time_text
    from streaming.sinks.delta.types import time_texts
    rnd = random.Random(4)
    bound = 838 * 3600 + 59 * 60 + 59
    values = [dt.timedelta(seconds=-bound), dt.timedelta(seconds=bound, microseconds=999999),
              dt.timedelta(microseconds=-1), dt.timedelta(0), None, dt.timedelta(minutes=-90)]
    values += [dt.timedelta(microseconds=rnd.randrange(-bound * 10**6, bound * 10**6))
               for _ in range(2000)]
    values += [dt.timedelta(seconds=rnd.randrange(-bound, bound)) for _ in range(200)]
    for unit in ("us", "ms", "s"):
        arr = pa.array(values, pa.duration("us"))
        if unit != "us":                    # whole units only: what a coarser column holds
            keep = [v for v in values if v is None or v == dt.timedelta(
                seconds=int(v.total_seconds())) or unit == "ms" and v.microseconds % 1000 == 0]
            arr = pa.array(keep, pa.duration("us")).cast(pa.duration(unit))
        got = time_texts(arr).to_pylist()
        assert got == [None if v is None else time_text(v) for v in arr.to_pylist()], unit
