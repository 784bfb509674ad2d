"""TABLE_MAP_EVENT bodies: the column types, metadata and optional metadata of one table."""

from __future__ import annotations

import copy

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.wire import bits_set, bits_set_msb, read_lenenc, read_lenenc_bytes
from cdc.errors import ParseError, TruncatedEventError
from cdc.rows.decode import RowPlans
from cdc.rows.old_temporal import OLD_TEMPORAL
from cdc.values.charsets import BINARY_COLLATION, STORED_BYTES_COLLATION, make_text_decoder
from cdc.values.types import TYPES, ColumnDef, TypeInfo, type_info

# Optional metadata field types (binlog_row_metadata=MINIMAL/FULL)
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12
VECTOR_DIMENSIONALITY = 13

# The most columns a MySQL or MariaDB table has (their MAX_FIELDS; hidden columns count too).
MAX_COLUMNS = 4096


class TableMap:
    """A table as described by a TABLE_MAP event.

    ``columns`` are :class:`~cdc.values.types.ColumnDef`; ``names`` are the column names when the
    server logged them (binlog_row_metadata=FULL), else ``None`` entries (filled by
    :meth:`apply_names` from information_schema by callers that have a connection).
    ``row_plans`` (:class:`cdc.rows.decode.RowPlans`) keeps what decoding this table's row
    images needs: per-column decoders, generated readers, compiled-decoder plans.
    """

    __slots__ = ("table_id", "flags", "schema", "table", "columns", "primary_key",
                 "has_optional_metadata", "json_columns", "row_plans")

    def __init__(self, table_id: int, flags: int, schema: str, table: str,
                 columns: list[ColumnDef], primary_key: list[int], has_optional_metadata: bool):
        self.table_id = table_id
        self.flags = flags
        self.schema = schema
        self.table = table
        self.columns = columns
        self.primary_key = primary_key
        self.has_optional_metadata = has_optional_metadata
        self.json_columns = [c.index for c in columns if c.type == T.JSON]
        self.row_plans = RowPlans(self)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def column_names(self) -> list[str]:
        return [c.name if c.name is not None else f"@{c.index + 1}" for c in self.columns]

    @property
    def full_row_reader(self):
        """The generated reader for full, NULL-free row images (``row_plans.full_row_reader``,
        see :mod:`cdc.rows.compile`); another object once :meth:`apply_names` changed names."""
        return self.row_plans.full_row_reader

    def apply_names(self, names: list[str]) -> None:
        """Set column names (e.g. from information_schema) when the binlog did not carry them;
        the decoding plans built so far are dropped (a new :attr:`row_plans`)."""
        for col, name in zip(self.columns, names):
            if col.name is None:
                col.name = name
        self.row_plans = RowPlans(self)

    def with_stored_text(self) -> "TableMap":
        """A copy whose text columns (CHAR, VARCHAR, TEXT) decode to the bytes the binlog holds,
        unconverted and unpadded (:data:`~cdc.values.charsets.STORED_BYTES_COLLATION`): for
        output that prints the stored bytes, as ``mysqlbinlog -v`` does. In some character sets
        two byte sequences decode to one character, so text cannot be encoded back."""
        columns = []
        for c in self.columns:
            c = copy.copy(c)
            if TYPES[c.real_type].character:
                c.collation = STORED_BYTES_COLLATION
            columns.append(c)
        return TableMap(self.table_id, self.flags, self.schema, self.table, columns,
                        list(self.primary_key), self.has_optional_metadata)

    def same_shape(self, other: "TableMap") -> bool:
        return (self.schema == other.schema and self.table == other.table
                and [(c.type, c.meta) for c in self.columns] == [(c.type, c.meta) for c in other.columns])

    def __repr__(self) -> str:
        return f"TableMap({self.table_id}, {self.qualified_name}, {len(self.columns)} columns)"


def charset_columns(tmap) -> list:
    """The columns of *tmap* a character set applies to (text kinds, ENUM, SET)."""
    return [c for c in tmap.columns
            if c.real_type in (T.ENUM, T.SET) or
            (c.real_type != T.GEOMETRY and type_info(c.real_type).character)]


def apply_default_charset(tmap, collation: int) -> bool:
    """Give the text columns of *tmap* without a charset (no charset metadata) *collation*;
    True when something changed (the table's decoding plans are then rebuilt).  Binary:
    the columns stay bytes, CHAR unpadded (BINARY(n) and CHAR(n) look the same)."""
    if collation == BINARY_COLLATION:
        return False
    missing = [c for c in charset_columns(tmap) if c.collation is None]
    for c in missing:
        c.collation = collation
    if missing:
        tmap.apply_names([])       # new row plans
    return bool(missing)


def decode_table_map(body, post_header_len: int, mariadb: bool = False) -> TableMap:
    """Decode a TABLE_MAP body (after the common header, checksum removed).

    What it allocates stays proportional to the body: a column count larger than the bytes
    left (each column has a type byte) raises :class:`~cdc.errors.TruncatedEventError`, one
    over :data:`MAX_COLUMNS` a :class:`~cdc.errors.ParseError`, before any column is built.

    *mariadb*: the binlog comes from MariaDB, which lists GEOMETRY columns among the character
    columns of the charset metadata (MySQL does not), and may log TIME/DATETIME/TIMESTAMP of
    any precision in their pre-5.6 formats (MySQL only of precision 0, which is then set).
    """
    try:
        return _decode(body, post_header_len, mariadb)
    except (IndexError, ValueError) as e:
        raise TruncatedEventError(f"TABLE_MAP event is shorter than its layout ({e})") from None


def _decode(body, post_header_len: int, mariadb: bool) -> TableMap:
    if post_header_len == 6:
        table_id = int.from_bytes(body[0:4], "little")
        pos = 4
    else:
        table_id = int.from_bytes(body[0:6], "little")
        pos = 6
    flags = int.from_bytes(body[pos:pos + 2], "little")
    pos = post_header_len
    n = body[pos]
    schema = bytes(body[pos + 1:pos + 1 + n]).decode("utf-8", "replace")
    pos += 2 + n
    n = body[pos]
    table = bytes(body[pos + 1:pos + 1 + n]).decode("utf-8", "replace")
    pos += 2 + n
    ncols, pos = read_lenenc(body, pos)
    # Before anything per column is built (~200 bytes of objects each): the count must fit.
    if ncols > len(body) - pos:
        raise TruncatedEventError(
            f"TABLE_MAP of {schema}.{table} claims {ncols} columns but only "
            f"{max(0, len(body) - pos)} bytes follow its column count (one type byte per "
            f"column): the event is corrupt")
    if ncols > MAX_COLUMNS:
        raise ParseError(
            f"TABLE_MAP of {schema}.{table} has {ncols} columns; MySQL and MariaDB tables have "
            f"at most {MAX_COLUMNS}: the event is corrupt (or not from a MySQL/MariaDB server)")
    types = bytes(body[pos:pos + ncols])
    pos += ncols
    meta_len, pos = read_lenenc(body, pos)
    meta_end = pos + meta_len
    infos: list[TypeInfo] = [type_info(t) for t in types]
    metas = []
    for info in infos:
        if info.meta_len:
            metas.append(info.parse_meta(body[pos:pos + info.meta_len]))
            pos += info.meta_len
        else:
            metas.append(None)
    if pos != meta_end:
        raise TruncatedEventError(
            f"TABLE_MAP metadata of {schema}.{table} has {meta_end - pos:+d} unexpected bytes")
    nbytes = (ncols + 7) // 8
    nullable = bits_set(bytes(body[pos:pos + nbytes]), ncols)
    pos += nbytes
    columns = [ColumnDef(i, t, m, nl) for i, (t, m, nl) in enumerate(zip(types, metas, nullable))]
    if not mariadb:
        # MySQL never wrote fractional seconds in the pre-5.6 TIME/DATETIME/TIMESTAMP formats;
        # MariaDB did (mysql56_temporal_format=OFF): there their precision stays unknown
        for c in columns:
            if c.type in OLD_TEMPORAL:
                c.meta = 0
    primary_key: list[int] = []
    has_opt = pos < len(body)
    if has_opt:
        primary_key = _optional_metadata(body, pos, columns, mariadb)
    return TableMap(table_id, flags, schema, table, columns, primary_key, has_opt)


def _is_character(col: ColumnDef, mariadb: bool) -> bool:
    if col.real_type == T.GEOMETRY:
        return mariadb
    return col.real_type not in (T.ENUM, T.SET) and type_info(col.type).character


def _is_enum_or_set(col: ColumnDef) -> bool:
    return col.real_type in (T.ENUM, T.SET)


def _charset_list(value, cols: list[ColumnDef], default_form: bool) -> None:
    """DEFAULT_CHARSET (default + exceptions) or COLUMN_CHARSET (one per column) for *cols*."""
    p = 0
    if default_form:
        default, p = read_lenenc(value, p)
        for c in cols:
            c.collation = default
        while p < len(value):
            idx, p = read_lenenc(value, p)
            coll, p = read_lenenc(value, p)
            if idx < len(cols):
                cols[idx].collation = coll
    else:
        for c in cols:
            if p >= len(value):
                break
            c.collation, p = read_lenenc(value, p)


def _str_values(value) -> list[list[bytes]]:
    """SET_STR_VALUE / ENUM_STR_VALUE: per column, its members' raw bytes (decoded once the
    ENUM_AND_SET_*_CHARSET fields, which come after them, said their character set)."""
    out = []
    p = 0
    while p < len(value):
        count, p = read_lenenc(value, p)
        names = []
        for _ in range(count):
            raw, p = read_lenenc_bytes(value, p)
            names.append(bytes(raw))
        out.append(names)
    return out


def _member_names(raws: list[bytes], collation: int | None) -> list[str]:
    """ENUM/SET members decoded in the column's character set (UTF-8 when the table map did not
    say; a binary ENUM's members, or bytes not valid there: UTF-8 with U+FFFD)."""
    decode = make_text_decoder(collation)
    out = []
    for raw in raws:
        name = decode(raw)
        out.append(name if type(name) is str else raw.decode("utf-8", "replace"))
    return out


def _optional_metadata(body, pos: int, columns: list[ColumnDef], mariadb: bool) -> list[int]:
    primary_key: list[int] = []
    character = [c for c in columns if _is_character(c, mariadb)]
    enum_set = [c for c in columns if _is_enum_or_set(c)]
    members: dict[int, list[bytes]] = {}   # ENUM/SET column index -> raw member names
    end = len(body)
    while pos < end:
        ftype = body[pos]
        length, pos = read_lenenc(body, pos + 1)
        value = bytes(body[pos:pos + length])
        if len(value) != length:
            raise TruncatedEventError("TABLE_MAP optional metadata runs past the end of the event")
        pos += length
        if ftype == SIGNEDNESS:
            numeric = [c for c in columns if type_info(c.real_type).numeric]
            for c, unsigned in zip(numeric, bits_set_msb(value, len(numeric))):
                c.unsigned = unsigned
        elif ftype == DEFAULT_CHARSET:
            _charset_list(value, character, True)
        elif ftype == COLUMN_CHARSET:
            _charset_list(value, character, False)
        elif ftype == ENUM_AND_SET_DEFAULT_CHARSET:
            _charset_list(value, enum_set, True)
        elif ftype == ENUM_AND_SET_COLUMN_CHARSET:
            _charset_list(value, enum_set, False)
        elif ftype == COLUMN_NAME:
            p = 0
            for c in columns:
                raw, p = read_lenenc_bytes(value, p)
                c.name = raw.decode("utf-8", "replace")
        elif ftype == SET_STR_VALUE:
            for c, names in zip([c for c in columns if c.real_type == T.SET], _str_values(value)):
                members[c.index] = names
        elif ftype == ENUM_STR_VALUE:
            for c, names in zip([c for c in columns if c.real_type == T.ENUM], _str_values(value)):
                members[c.index] = names
        elif ftype == GEOMETRY_TYPE:
            p = 0
            for c in [c for c in columns if c.real_type == T.GEOMETRY]:
                c.geometry_type, p = read_lenenc(value, p)
        elif ftype == SIMPLE_PRIMARY_KEY:
            p = 0
            while p < len(value):
                idx, p = read_lenenc(value, p)
                primary_key.append(idx)
        elif ftype == PRIMARY_KEY_WITH_PREFIX:
            p = 0
            while p < len(value):
                idx, p = read_lenenc(value, p)
                _prefix, p = read_lenenc(value, p)
                primary_key.append(idx)
        elif ftype == COLUMN_VISIBILITY:
            for c, visible in zip(columns, bits_set_msb(value, len(columns))):
                c.visible = visible
        elif ftype == VECTOR_DIMENSIONALITY:
            p = 0
            for c in [c for c in columns if c.real_type == T.VECTOR]:
                c.vector_dimensions, p = read_lenenc(value, p)
        # unknown field types are skipped: their length is known
    for idx, raws in members.items():
        c = columns[idx]
        if c.real_type == T.SET:
            c.set_values = _member_names(raws, c.collation)
        else:
            c.enum_values = _member_names(raws, c.collation)
    for idx in primary_key:
        if idx >= len(columns):
            raise TruncatedEventError(f"TABLE_MAP primary key names column {idx} of "
                                      f"{len(columns)}: the event is corrupt")
        columns[idx].primary_key = True
    return primary_key
