"""Partial JSON updates: the JSON diffs of PARTIAL_UPDATE_ROWS events, read and applied.

MySQL writes them with ``binlog_row_value_options=PARTIAL_JSON``: a partially updated JSON
column of an after-image holds a list of diffs (operation, path, new value) instead of the
document.  Sources (MySQL 8.x): ``sql-common/json_diff.cc`` (``Json_diff::write_binary``,
``Json_diff_vector::read_binary``, ``apply_json_diff``) and ``sql-common/json_path.cc`` (path
text written and parsed).
"""

from __future__ import annotations

import functools
import json
from typing import NamedTuple

from cdc.errors import JsonDiffError
from cdc.values.jsonb.binary import decode_json_at
from cdc.values.kinds import ABSENT, JsonDiffs

__all__ = ["read_json_diffs", "apply_json_diffs", "parse_json_path", "JsonDiff", "JsonDiffError",
           "REPLACE", "INSERT", "REMOVE"]


REPLACE = 0
INSERT = 1
REMOVE = 2
_OP_NAMES = ("REPLACE", "INSERT", "REMOVE")


class JsonDiff(NamedTuple):
    """One change of a partially updated JSON column (``enum_json_diff_operation``).

    ``operation`` is :data:`REPLACE` (0), :data:`INSERT` (1) or :data:`REMOVE` (2); ``path``
    the path text MySQL wrote (``$.a[1]``, ``$."b c"[last]``); ``value`` the decoded new value
    (``None`` for REMOVE -- and for a JSON null).
    """

    operation: int
    path: str
    value: object = None

    def __repr__(self) -> str:
        name = _OP_NAMES[self.operation] if 0 <= self.operation < 3 else self.operation
        if self.operation == REMOVE:
            return f"JsonDiff({name}, {self.path!r})"
        return f"JsonDiff({name}, {self.path!r}, {self.value!r})"


def _net_field_length(buf, p: int, end: int):
    """MySQL's net_field_length_checked: (value, position after it)."""
    if p >= end:
        raise JsonDiffError("JSON diff truncated before a length field")
    b = buf[p]
    if b < 251:
        return b, p + 1
    if b == 251:
        raise JsonDiffError("JSON diff has a NULL length (0xfb)")
    size = 2 if b == 252 else 3 if b == 253 else 8
    if p + 1 + size > end:
        raise JsonDiffError("JSON diff truncated inside a length field")
    return int.from_bytes(buf[p + 1:p + 1 + size], "little"), p + 1 + size


def read_json_diffs(buf, pos: int, length: int) -> list[JsonDiff]:
    """The JSON diffs in ``buf[pos:pos+length]`` (a partial JSON column of a PARTIAL_UPDATE_ROWS
    after-image, after its 4-byte length; ``Json_diff_vector::read_binary``).

    Each diff: operation (1 byte: 0 REPLACE, 1 INSERT, 2 REMOVE), path length
    (net_field_length) + path text, then -- unless REMOVE -- value length (net_field_length) +
    the value as a binary JSON document.
    """
    end = pos + length
    if pos < 0 or length < 0 or end > len(buf):
        raise JsonDiffError(f"JSON diff list of {length} bytes runs past the end of the event")
    if type(buf) is not bytes:
        buf = bytes(buf[pos:end])
        pos, end = 0, length
    diffs = []
    while pos < end:
        op = buf[pos]
        if op > REMOVE:
            raise JsonDiffError(f"unknown JSON diff operation {op}")
        n, pos = _net_field_length(buf, pos + 1, end)
        if n > end - pos:
            raise JsonDiffError("JSON diff path runs past the end of the diff list")
        try:
            path = buf[pos:pos + n].decode()
        except UnicodeDecodeError:
            raise JsonDiffError("JSON diff path is not UTF-8") from None
        pos += n
        if op == REMOVE:
            diffs.append(JsonDiff(op, path, None))
            continue
        n, pos = _net_field_length(buf, pos, end)
        if n > end - pos:
            raise JsonDiffError("JSON diff value runs past the end of the diff list")
        value = decode_json_at(buf, pos, pos + n)
        pos += n
        diffs.append(JsonDiff(op, path, value))
    return diffs


# Path legs: (_MEMBER, name) | (_CELL, index) | (_FROM_END, index) -- "[last-index]".
_MEMBER = 0
_CELL = 1
_FROM_END = 2
_WS = " \t\n\r\x0b\x0c"


@functools.lru_cache(maxsize=4096)
def parse_json_path(path: str) -> tuple:
    """A MySQL JSON path made of member and array-cell legs, as a tuple of legs.

    Accepts what ``json_path.cc`` writes and parses: ``$``, ``.name``, ``."quoted name"`` (JSON
    escapes), ``[N]``, ``[last]``, ``[last-N]``, whitespace between tokens.  Wildcards
    (``.*``, ``[*]``, ``**``) and ranges (``[1 to 3]``) never appear in diffs and raise
    :class:`JsonDiffError`, as does anything malformed.
    """
    s = path
    n = len(s)

    def fail(msg: str):
        return JsonDiffError(f"JSON diff path {path!r}: {msg}")

    def ws(i: int) -> int:
        while i < n and s[i] in _WS:
            i += 1
        return i

    def index(i: int):
        from_end = False
        if s.startswith("last", i):
            from_end = True
            i = ws(i + 4)
            if i < n and s[i] == "-":
                i = ws(i + 1)
            else:
                return 0, True, i
        j = i
        while j < n and "0" <= s[j] <= "9":
            j += 1
        if j == i:
            raise fail(f"array index expected at {i}")
        value = int(s[i:j])
        if value > 0xFFFFFFFF:
            raise fail("array index over 2**32")
        return value, from_end, j

    i = ws(0)
    if i >= n or s[i] != "$":
        raise fail("does not start with '$'")
    i = ws(i + 1)
    legs = []
    while i < n:
        c = s[i]
        if c == "[":
            i = ws(i + 1)
            if i < n and s[i] == "*":
                raise fail("array wildcard [*] is not supported")
            idx, from_end, i = index(i)
            i = ws(i)
            if s.startswith("to", i) and i + 2 < n and s[i + 2] in _WS and s[i - 1] in _WS:
                raise fail("array ranges are not supported")
            if i >= n or s[i] != "]":
                raise fail(f"']' expected at {i}")
            i += 1
            legs.append((_FROM_END if from_end else _CELL, idx))
        elif c == ".":
            i = ws(i + 1)
            if i >= n:
                raise fail("member name expected")
            if s[i] == "*":
                raise fail("member wildcard .* is not supported")
            if s[i] == '"':
                j = i + 1
                while j < n:
                    if s[j] == "\\":
                        j += 2
                        continue
                    if s[j] == '"':
                        break
                    j += 1
                if j >= n:
                    raise fail("unterminated quoted member name")
                raw = s[i:j + 1]
                i = j + 1
            else:
                j = i
                while j < n and s[j] not in _WS and s[j] not in "[.*":
                    j += 1
                raw = '"' + s[i:j] + '"'
                if j == i:
                    raise fail("empty member name")
                i = j
            try:
                name = json.loads(raw)
            except ValueError:
                raise fail(f"bad member name {raw}") from None
            if type(name) is not str:
                raise fail(f"bad member name {raw}")
            legs.append((_MEMBER, name))
        elif c == "*":
            raise fail("the ** wildcard is not supported")
        else:
            raise fail(f"unexpected {c!r} at {i}")
        i = ws(i)
    return tuple(legs)


def _mysql_key(k: str):
    b = k.encode("utf-8", "surrogatepass")
    return len(b), b


def _position(kind: int, idx: int, size: int):
    """Json_array_index: (position, within bounds)."""
    if kind == _FROM_END:
        return (size - idx - 1 if idx < size else 0), idx < size
    return min(idx, size), idx < size


def _describe(node) -> str:
    if isinstance(node, dict):
        return "an object"
    if isinstance(node, list):
        return "an array"
    if node is None:
        return "null"
    return f"a {type(node).__name__}"


def apply_json_diffs(doc: object, diffs) -> object:
    """The document after applying *diffs* (``apply_json_diff`` semantics) to *doc*.

    *doc* is the decoded before-image value (:data:`ABSENT`, when the before image leaves the
    column out: a :class:`~cdc.values.kinds.JsonDiffs` of the diffs is returned -- an empty one
    when an UPDATE left the document as it was); it is not modified (containers on the changed
    paths are copied, the rest is shared).  REPLACE needs the path to exist; INSERT adds an
    object member (the key must be new; keys are kept in MySQL's stored order, so the result
    equals the decoded full after-image) or inserts into an array at the index (past the end:
    appends); REMOVE deletes an existing member or element.  There is no auto-wrapping.  A diff
    that does not apply -- MySQL's replica rejects it too -- raises :class:`JsonDiffError`.
    """
    if doc is ABSENT:
        # No document before (binlog_row_image=MINIMAL): the change itself is the value.
        return JsonDiffs(diffs)
    if not diffs:
        return doc
    root = [doc]
    fresh: set[int] = set()
    keep: list = []          # keeps copies alive so their ids stay unique during this call

    def own(parent, key, node):
        """*node* (= parent[key]) as a container private to this call."""
        if id(node) in fresh:
            return node
        t = type(node)
        if t is dict or isinstance(node, dict):
            node = dict(node)
        elif t is list or isinstance(node, (list, tuple)):
            node = list(node)
        else:
            return node
        parent[key] = node
        fresh.add(id(node))
        keep.append(node)
        return node

    for diff in diffs:
        op, path, value = diff[0], diff[1], diff[2]
        legs = parse_json_path(path)
        if not legs:
            raise JsonDiffError(f"JSON diff {_OP_NAMES[op] if 0 <= op < 3 else op} at '$': "
                                f"MySQL never writes a diff for the whole document")
        node = own(root, 0, root[0])
        for depth, (kind, key) in enumerate(legs):
            last = depth == len(legs) - 1
            if last and op != REPLACE:
                break
            if isinstance(node, dict):
                if kind != _MEMBER or key not in node:
                    raise _rejected(diff, legs, depth, node)
                if last:
                    node[key] = value
                else:
                    node = own(node, key, node[key])
            elif isinstance(node, list):
                if kind == _MEMBER:
                    raise _rejected(diff, legs, depth, node)
                p, within = _position(kind, key, len(node))
                if not within:
                    raise _rejected(diff, legs, depth, node)
                if last:
                    node[p] = value
                else:
                    node = own(node, p, node[p])
            else:
                raise _rejected(diff, legs, depth, node)
        if op == REPLACE:
            continue
        kind, key = legs[-1]
        if op == INSERT:
            if isinstance(node, dict) and kind == _MEMBER:
                if key in node:
                    raise _rejected(diff, legs, len(legs) - 1, node, "the member exists")
                if node and _mysql_key(key) < _mysql_key(next(reversed(node))):
                    node[key] = value
                    items = sorted(node.items(), key=lambda kv: _mysql_key(kv[0]))
                    node.clear()
                    node.update(items)
                else:
                    node[key] = value
            elif isinstance(node, list) and kind != _MEMBER:
                node.insert(_position(kind, key, len(node))[0], value)
            else:
                raise _rejected(diff, legs, len(legs) - 1, node)
        elif op == REMOVE:
            if isinstance(node, dict) and kind == _MEMBER and key in node:
                del node[key]
            elif isinstance(node, list) and kind != _MEMBER and \
                    _position(kind, key, len(node))[1]:
                del node[_position(kind, key, len(node))[0]]
            else:
                raise _rejected(diff, legs, len(legs) - 1, node)
        else:
            raise JsonDiffError(f"unknown JSON diff operation {op}")
    return root[0]


def _rejected(diff, legs, depth: int, node, why: str = "") -> JsonDiffError:
    name = _OP_NAMES[diff[0]] if 0 <= diff[0] < 3 else str(diff[0])
    kind, key = legs[depth]
    leg = "." + json.dumps(key, ensure_ascii=False) if kind == _MEMBER else \
        ("[last-%d]" % key if kind == _FROM_END else "[%d]" % key)
    if not why:
        why = f"leg {leg} does not match {_describe(node)}"
        if depth == 0 and node is ABSENT:
            why = ("the before image lacks this column (binlog_row_image=MINIMAL?): "
                   "a partial JSON update cannot be rebuilt without it")
    return JsonDiffError(f"JSON diff {name} {diff[1]!r} does not apply: {why}")
