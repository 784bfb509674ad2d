"""A :class:`~cdc.schema.history.SchemaHistory` as JSON and back: the tables' shapes as of a binlog
position, with a fixed key order (the same state always gives the same text) -- what a Spark
offset, a task's partition and ``tail --schema-file`` carry."""

from __future__ import annotations

import bisect
import json

from cdc.errors import ConfigurationError
from cdc.schema.columns import ServerColumn
from cdc.schema.tables import TableSchema
from cdc.schema.versions import BEGINNING, DROPPED, Unknown, Versions, point_key

#: the version of :meth:`SchemaHistory.to_json`'s form
STATE_FORMAT = 1


def _table_json(state):
    if state is None:
        return None
    if isinstance(state, Unknown):
        return {"unknown": [state.since[0], state.since[1], state.reason]}
    return {"columns": [[c.name, c.data_type, c.column_type, c.precision, c.collation,
                         c.primary_key, c.numeric_precision, c.numeric_scale, c.octets,
                         c.nullable, list(c.member_names) if c.member_names is not None else None,
                         list(c.default) if c.default is not None else None]
                        for c in state.columns],
            "collation": state.collation, "primary_key": list(state.primary_key),
            "unique_keys": [[n, [[c, p] for c, p in parts]] for n, parts in state.unique_keys],
            "origin": state.origin}


def _table_from_json(d):
    if d is None:
        return None
    if "unknown" in d:
        file, pos, reason = d["unknown"]
        return Unknown((file, pos), reason)
    cols = tuple(ServerColumn(c[0], c[1], c[2], c[3], c[4], bool(c[5]), c[6], c[7], c[8],
                              bool(c[9]), tuple(c[10]) if c[10] is not None else None,
                              tuple(c[11]) if len(c) > 11 and c[11] is not None else None)
                 for c in d["columns"])
    return TableSchema(cols, d["collation"], tuple(d["primary_key"]),
                       tuple((n, tuple((c, bool(p)) for c, p in parts))
                             for n, parts in d["unique_keys"]), d["origin"])


def db_diff(before: dict, after: dict) -> dict:
    return {d: after.get(d, DROPPED) for d in sorted(set(before) | set(after))
            if before.get(d, DROPPED) != after.get(d, DROPPED)}


def history_to_json(h, file: str | None, pos: int | None) -> dict:
    key = point_key(file, pos) if file is not None else None
    tables = []
    for k in sorted(h._tables):
        v = h._tables[k]
        if key is None:
            state, known = (v.states[-1], True) if v.states else (None, False)
        else:
            i = bisect.bisect_left(v.keys, key) - 1     # before any statement at the position
            state, known = (v.states[i], True) if i >= 0 else (None, False)
        if known:
            tables.append([k[0], k[1], _table_json(state)])
    databases = dict(h._db_base)
    for at, changes in h._db_changes:
        if key is None or at < key:
            for db, coll in changes.items():
                if coll is DROPPED:
                    databases.pop(db, None)
                else:
                    databases[db] = coll
    out = {"format": STATE_FORMAT, "mariadb": bool(h.mariadb), "version": h.version,
           "lower": int(h.lower),
           "databases": [[db, coll] for db, coll in sorted(databases.items())],
           "seed_point": list(h._seed_point) if h._seed_point else None,
           "tables": tables}
    if h._seed_key is not None and key is not None and key < h._seed_key:
        # before the seed point, statements on tables read from information_schema are not
        # followed exactly (see SchemaHistory): the seed comes back into effect at its point
        out["seed"] = [[db, table, _table_json(s)] for (db, table), s in sorted(h._seed.items())]
        # tables the seed describes only from a later statement's end (SchemaHistory.seed)
        later = [[db, table, end[0], end[1]] for (db, table), end in sorted(h._anchors.items())
                 if point_key(*end) > key]
        if later:
            out["exact_from"] = later
    return out


def history_from_json(cls, data, **kw) -> object:
    if isinstance(data, (str, bytes)):
        data = json.loads(data)
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise ConfigurationError(f"not a schema history of format {STATE_FORMAT}: "
                                 f"{str(data)[:200]!r}")
    h = cls(**kw)
    h.mariadb = bool(data["mariadb"])
    h.version = data["version"]
    h.lower = bool(data["lower"])
    h.databases = {db: coll for db, coll in data["databases"]}
    h._db_base = dict(h.databases)
    for db, table, state in data["tables"]:
        v = h._tables[(db, table)] = Versions()
        v.put(BEGINNING, _table_from_json(state))
    point = data.get("seed_point")
    h._seed_point = tuple(point) if point else None
    h._seed_key = point_key(*point) if point else None
    h._seed = {(db, table): _table_from_json(s) for db, table, s in data.get("seed") or ()}
    for db, table, file, end in data.get("exact_from") or ():
        h._anchors[(db, table)] = (file, end)
        v = h._tables.get((db, table))
        if v is None:
            v = h._tables[(db, table)] = Versions()
        v.put(point_key(file, end), h._seed.get((db, table)))
    h.seeded = True
    h.generation = 1
    return h
