"""The last change per primary key of one table's changes (the rule of
:mod:`streaming.sinks.plan`), in Arrow compute (no per-row Python): the fast path of
:class:`streaming.sinks.delta.upserter.DeltaUpserter` for JSON row images
(:func:`last_changes`) and for typed mode's struct images (:func:`last_changes_typed`: the
structs' children are the columns, no JSON at all).

The same table, as the MERGE reads it, as the upserter's dict walk over the changes in ``seq``
order (``_last_changes_fast``, kept as the reference the tests compare with):

* every change is a candidate at position ``2 i + RANK_CHANGE`` with its key (*i*: its rank in
  ``seq`` order): the after image's for inserts/updates/snapshot rows, the before image's for
  deletes;
* an update whose key changed adds a delete of the old key at ``2 i + RANK_MOVED_AWAY`` (it
  loses to anything at or after change *i* with that key, and wins over anything before it);
* per key the candidate with the highest position wins (``group_by(...).aggregate(max)``);
* the winners from after images come first, then those from before images, each side in
  position order (the dict's insertion order of the reference).

Shortcuts, each what the candidates would give: when no key is deleted, moved away or changed
twice (a snapshot, a bulk load, an UPDATE of many rows) the after images are the result as they
came, with no candidates (distinct keys told by a strictly ascending key first, a hash only
when they are not). In a batch without deletes, JSON before images are read for their keys
alone: the delete of a key an update moved away from then carries that key and nulls (the
MERGE deletes by key).

Keys are compared as Arrow values; a floating-point key (``-0.0 == 0.0`` in Python, not in a
hash) raises :class:`~streaming.sinks.json_images.NotFast` so the caller takes the reference path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.sinks.json_images import NotFast, as_type, read_images
from streaming.sinks.plan import RANK_CHANGE, RANK_MOVED_AWAY

__all__ = ["by_table", "in_seq_order", "last_changes", "last_changes_typed",
           "last_truncate"]

_POS, _SIDE, _ROW, _OP = "__pos", "__side", "__row", "__op"


def _indices(mask: pa.Array) -> np.ndarray:
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False))


def last_changes(ops: pa.Array, befores: pa.Array, afters: pa.Array, schema: pa.Schema,
                 read_schema: pa.Schema, names: list[str], primary_key: list[str],
                 op_column: str, seq=None) -> pa.Table:
    """The last change per key of the changes (*ops*, *befores*, *afters*: JSON texts, in
    ``seq`` order) as a table of *schema* plus *op_column*; :class:`NotFast` when the images
    need the per-value path. *seq*: the changes' seqs when they are inserts and snapshot rows
    only, not in ``seq`` order (:func:`by_table`)."""
    ops, befores, afters, is_d, a_at, b_at = _sides(ops, befores, afters, schema, primary_key)
    a = read_images(_take(afters, a_at), schema, read_schema, names)
    # without deletes, a before image only gives the key an update moved away from (a delete,
    # whose other columns the MERGE does not read), so only the key is read; an update's
    # columns are checked on its after image. A delete's image is read whole: it is all that
    # tells a column the table definition lacks
    b = read_images(_take(befores, b_at), schema, read_schema, primary_key,
                    only_need=not pc.any(is_d).as_py())
    return _last_of(ops, is_d, a_at, a, b_at, b, schema, primary_key, op_column, seq)


def last_changes_typed(ops: pa.Array, befores: pa.Array, afters: pa.Array, schema: pa.Schema,
                       primary_key: list[str], op_column: str, convert=None,
                       seq=None) -> pa.Table:
    """:func:`last_changes` of typed-mode images (*befores*, *afters*: struct arrays whose
    fields are *schema*'s columns): no JSON at all. *convert*: ``{column: function(Arrow
    array) -> Arrow array of the schema's type}`` for the columns whose typed-mode type is not
    their Delta type (TIME); any other difference is a cast. :class:`NotFast` when the structs'
    fields are not the schema's columns; *seq*: as there."""
    ops, befores, afters, is_d, a_at, b_at = _sides(ops, befores, afters, schema, primary_key)
    a = _typed_table(_take(afters, a_at), schema, convert)
    b = _typed_table(_take(befores, b_at), schema, convert)
    return _last_of(ops, is_d, a_at, a, b_at, b, schema, primary_key, op_column, seq)


def _take(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """*arr*'s elements at *rows* (ascending indexes): *arr* itself when that is all of them."""
    return arr if len(rows) == len(arr) else arr.take(pa.array(rows))


def _typed_table(structs: pa.Array, schema: pa.Schema, convert) -> pa.Table:
    t = structs.type
    if [t.field(i).name for i in range(t.num_fields)] != schema.names:
        raise NotFast("the images' fields are not the table's columns")
    # every struct taken is an image (_sides: no change lacks the one it needs), so the
    # children are the values as they are
    columns = [convert[f.name](_child(structs, i)) if convert and f.name in convert
               else as_type(_child(structs, i), f.type) for i, f in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def _child(structs, i: int):
    """Field *i* of a struct array, chunked or not, as it is (no copy)."""
    if isinstance(structs, pa.ChunkedArray):
        return pa.chunked_array([c.field(i) for c in structs.chunks], structs.type.field(i).type)
    return structs.field(i)


def _sides(ops, befores, afters, schema, primary_key):
    """Checks, and the change indexes of the after images (every non-delete) and of the
    before images that count (deletes, updates). The images stay as they came (chunked: no
    copy of their texts)."""
    if any(pa.types.is_floating(schema.field(k).type) for k in primary_key):
        raise NotFast("a floating-point primary key")
    ops = ops.combine_chunks() if isinstance(ops, pa.ChunkedArray) else ops
    is_d = pc.fill_null(pc.equal(ops, "d"), False)
    if pc.any(pc.and_(is_d, pc.is_null(befores))).as_py():
        raise NotFast("a delete without a before image")
    if pc.any(pc.and_(pc.invert(is_d), pc.is_null(afters))).as_py():
        raise NotFast("a change without an after image")
    has_b = pc.and_(pc.is_valid(befores), pc.is_in(ops, value_set=pa.array(["d", "u"])))
    a_at = _indices(pc.invert(is_d))                # change index of each after-image row
    b_at = _indices(has_b)                          # change index of each before-image row
    return ops, befores, afters, is_d, a_at, b_at


def _last_of(ops, is_d, a_at, a, b_at, b, schema, primary_key, op_column,
             seq=None) -> pa.Table:
    """The winners among the after images *a* (of changes *a_at*) and before images *b* (of
    changes *b_at*); *seq*: the changes' seqs when they are not in ``seq`` order."""
    a_ops = ops if len(a_at) == len(ops) else ops.take(pa.array(a_at))
    b_is_d = is_d.to_numpy(zero_copy_only=False)[b_at]
    d_rows = np.flatnonzero(b_is_d)
    u_rows = np.flatnonzero(~b_is_d)                # updates with a before image
    moved = _moved(is_d, a, b, b_at, u_rows, primary_key)
    if not len(d_rows) and not len(moved) and _unique(a, primary_key):
        # every key changed once, none deleted or moved away (a bulk load, a snapshot chunk,
        # an UPDATE of many rows): each change is its key's last -- what the candidates below
        # would pick, in the order the changes came
        return a.append_column(pa.field(op_column, pa.string()), a_ops)
    rank = None
    if seq is not None:                         # a change's position: its rank in seq order
        order = pc.sort_indices(seq).to_numpy()     # (stable)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))

    def pos(at, rank_of):
        return 2 * (at if rank is None else rank[at]) + rank_of

    def cand(table, rows, at_pos, op):
        cols = {k: table.column(k).take(pa.array(rows, pa.int64())) for k in primary_key}
        cols[_POS] = pa.array(at_pos, pa.int64())
        cols[_SIDE] = pa.array(np.full(len(rows), table is b, dtype=np.int8))
        cols[_ROW] = pa.array(rows, pa.int64())
        cols[_OP] = op
        return pa.table(cols)

    deleted = pa.scalar("d", pa.string())
    parts = [cand(a, np.arange(len(a_at)), pos(a_at, RANK_CHANGE), a_ops)]
    parts.append(cand(b, d_rows, pos(b_at[d_rows], RANK_CHANGE),
                      pa.repeat(deleted, len(d_rows))))
    if len(moved):
        parts.append(cand(b, moved, pos(b_at[moved], RANK_MOVED_AWAY),
                          pa.repeat(deleted, len(moved))))
    cands = pa.concat_tables(parts)
    best = cands.group_by(primary_key, use_threads=False).aggregate([(_POS, "max")])
    won = cands.filter(pc.is_in(cands.column(_POS), value_set=best.column(_POS + "_max")))
    won = won.take(pc.sort_indices(won.column(_POS)))
    out, op_parts = [], []
    for side, table in ((0, a), (1, b)):
        pick = won.filter(pc.equal(won.column(_SIDE), pa.scalar(side, pa.int8())))
        if pick.num_rows:
            out.append(table.take(pick.column(_ROW)))
            op_parts.append(pick.column(_OP))
    result = pa.concat_tables(out) if out else schema.empty_table()
    op = (pa.chunked_array([c for p in op_parts for c in p.chunks], pa.string()) if op_parts
          else pa.array([], pa.string()))
    return result.append_column(pa.field(op_column, pa.string()), op)


def _moved(is_d, a, b, b_at, u_rows, primary_key) -> np.ndarray:
    """The rows of *b* (before images of changes *b_at*) among *u_rows* (updates) whose after
    image in *a* has another key."""
    if not len(u_rows):
        return u_rows
    a_row_of = np.cumsum(~is_d.to_numpy(zero_copy_only=False)) - 1
    new_rows = a_row_of[b_at[u_rows]]
    every = len(u_rows) == b.num_rows and len(new_rows) == a.num_rows and \
        bool(np.all(new_rows == np.arange(len(new_rows))))      # updates only: no take
    changed = None
    for k in primary_key:
        old, new = b.column(k), a.column(k)
        if not every:
            old, new = old.take(pa.array(u_rows, pa.int64())), new.take(pa.array(new_rows,
                                                                                 pa.int64()))
        same = pc.or_(pc.fill_null(pc.equal(old, new), False),
                      pc.and_(pc.is_null(old), pc.is_null(new)))
        diff = pc.invert(same)
        changed = diff if changed is None else pc.or_(changed, diff)
    return u_rows[_indices(changed)]


def _unique(table: pa.Table, keys: list[str]) -> bool:
    """Whether no two rows of *table* have the same *keys* (nulls equal, as in a group-by)."""
    if _ascending(table, keys):
        return True
    if len(keys) == 1:
        return pc.count_distinct(table.column(keys[0]), mode="all").as_py() == table.num_rows
    return table.select(keys).group_by(keys, use_threads=False).aggregate([]).num_rows \
        == table.num_rows


def _ascending(table: pa.Table, keys: list[str]) -> bool:
    """Whether the rows' *keys* (no nulls) strictly ascend (so are distinct): the keys of a
    snapshot chunk, of a bulk load, in a few comparisons instead of a hash table."""
    n = table.num_rows
    if n < 2:
        return True
    cols = [table.column(k) for k in keys]
    if any(c.null_count for c in cols):
        return False
    try:
        up = None
        for c in reversed(cols):                # lexicographic: the first column decides
            nxt, prev = c.slice(1), c.slice(0, n - 1)
            gt = pc.greater(nxt, prev)
            up = gt if up is None else pc.or_(gt, pc.and_(pc.equal(nxt, prev), up))
        return pc.all(up).as_py()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False


def by_table(changes: pa.Table):
    """``((db, table), changes of that table, in_order)``, tables in order of appearance. A
    table's changes come in ``seq`` order (a stable sort), except when they are inserts and
    snapshot rows only: then they come as they came, *in_order* False when that is not ``seq``
    order (their ``seq`` column orders them where it matters: :func:`last_changes` of keys
    that repeat) -- a snapshot's chunks, whose seqs restart with each chunk, are not copied
    into an interleaving of their texts."""
    keys = changes.select(["db", "table"]).group_by(["db", "table"], use_threads=False)
    keys = keys.aggregate([])
    for db, name in zip(keys.column("db").to_pylist(), keys.column("table").to_pylist()):
        part = changes
        if keys.num_rows > 1:
            part = changes.filter(pc.and_kleene(_same(changes.column("db"), db),
                                                _same(changes.column("table"), name)))
        seq = part.column("seq")
        in_order = len(seq) < 2 or pc.all(pc.greater_equal(seq[1:], seq[:-1])).as_py()
        if not in_order and not pc.all(pc.is_in(part.column("op"), value_set=_INSERTS)).as_py():
            part, in_order = in_seq_order(part), True
        yield (db, name), part, in_order


def in_seq_order(part: pa.Table) -> pa.Table:
    """*part* sorted by ``seq`` (stable: changes of equal seqs keep their order)."""
    return part.take(pc.sort_indices(part, [("seq", "ascending")]))


_INSERTS = pa.array(["c", "r"], pa.string())


def _same(col, value):
    return pc.is_null(col) if value is None else pc.fill_null(pc.equal(col, value), False)


def last_truncate(part: pa.Table) -> int | None:
    """The index of the last TRUNCATE (op ``t``) among *part*'s changes, or None."""
    at = _indices(pc.fill_null(pc.equal(part.column("op"), "t"), False))
    return int(at[-1]) if len(at) else None
