"""Character sets against the live MariaDB (issue 12): every charset of SHOW CHARACTER SET
decodes to what the server's own CONVERT(... USING utf8mb4) returns; text columns and ENUM/SET
members of many charsets decoded from the binlog equal the server's SELECT (both row decoders:
this module is in ROW_DECODER_MODULES); a statement sent over a latin1 connection keeps its text.
"""

from __future__ import annotations

import pytest

from cdc.binlog.events import QueryEvent
from cdc.binlog.files import read_events
from cdc.binlog.transactions import assemble
from cdc.values.charset_tables import MULTI_BYTE
from cdc.values.charsets import charset_of, make_text_decoder
from cdc.values.kinds import InvalidText

pytestmark = pytest.mark.server

_BATCH = 400


def _convert(conn, cs: str, codes: list[bytes]) -> list[str]:
    out = []
    with conn.cursor() as cur:
        for i in range(0, len(codes), _BATCH):
            cur.execute("SELECT " + ", ".join(
                f"HEX(CONVERT(CONVERT(UNHEX('{c.hex()}') USING {cs}) USING utf8mb4))"
                for c in codes[i:i + _BATCH]))
            out += [bytes.fromhex(h).decode("utf-8") for h in cur.fetchone()]
    return out


@pytest.fixture(scope="module")
def server_sets(mariadb):
    """(charset, max length, default collation id) of every SHOW CHARACTER SET row."""
    rows = mariadb.execute("SELECT c.character_set_name, c.maxlen, o.id FROM "
                           "information_schema.character_sets c JOIN "
                           "information_schema.collations o ON o.collation_name = "
                           "c.default_collate_name ORDER BY 1")
    return [(cs, maxlen, cid) for cs, maxlen, cid in rows]


def test_collation_ids_name_their_charset(mariadb, row_decoder):
    rows = mariadb.execute("SELECT id, character_set_name FROM information_schema.collations "
                           "WHERE id IS NOT NULL")
    wrong = [(cid, cs, charset_of(cid)) for cid, cs in rows if charset_of(cid) != cs]
    assert len(rows) > 300 and wrong == []


def test_every_byte_of_every_single_byte_charset(mariadb, server_sets, row_decoder):
    conn = mariadb.connect()
    singles = [(cs, cid) for cs, maxlen, cid in server_sets if maxlen == 1 and cs != "binary"]
    assert len(singles) >= 25
    wrong = {}
    for cs, cid in singles:
        server = _convert(conn, cs, [bytes((b,)) for b in range(256)])
        ours = [make_text_decoder(cid)(bytes((b,))) for b in range(256)]
        bad = [(hex(b), s, o) for b, (s, o) in enumerate(zip(server, ours)) if s != o]
        if bad:
            wrong[cs] = bad[:4]
        # a whole string at once too
        assert make_text_decoder(cid)(bytes(range(256))) == "".join(server), cs
    assert wrong == {}


@pytest.mark.slow
def test_every_code_of_the_east_asian_charsets(mariadb, server_sets, row_decoder):
    conn = mariadb.connect()
    ids = {cs: cid for cs, _m, cid in server_sets}
    for cs, (trails, rows2, rows3) in MULTI_BYTE.items():
        codes = [bytes((lead, t)) for lead in rows2 for t in trails]
        if rows3:
            codes += [bytes((0x8F, lead, t)) for lead in rows3 for t in trails[::7]]
        server = _convert(conn, cs, codes)
        dec = make_text_decoder(ids[cs])
        bad = [(c.hex(), s, dec(c)) for c, s in zip(codes, server) if dec(c) != s]
        assert bad == [], (cs, bad[:5])


def test_representative_strings_of_every_multi_byte_charset(mariadb, server_sets, row_decoder):
    """Unicode sample text converted by the server into each multi-byte set (what it cannot hold
    becomes '?'), some malformed bytes, eucjpms NEC row 13 and IBM extensions."""
    conn = mariadb.connect()
    sample = "Aé€Жук日本語①⑳Ⅰⅰ髙﨑ｱ한국어中文繁體😀~\\¥¬∥－"
    extra = {"eucjpms": ["ADA1ADA2ADB4ADB5", "8FF3F3", "F9A1FCFE", "8FA2B7", "41A141", "A1"],
             "ujis": ["F5A1", "A1C0", "8FA2B7", "8EB1"], "sjis": ["815F", "5C7E", "81"],
             "cp932": ["815F", "8740", "ED40", "FA40"], "euckr": ["8141", "C9A1"],
             "big5": ["A15A", "A240", "F9FE"], "gbk": ["8140", "A2E3"]}
    checked = []
    for cs, maxlen, cid in server_sets:
        if maxlen == 1:
            continue
        with conn.cursor() as cur:
            cur.execute("SELECT HEX(CONVERT(%s USING " + cs + "))", (sample,))
            stored = [cur.fetchone()[0]] + extra.get(cs, [])
        server = _convert(conn, cs, [bytes.fromhex(h) for h in stored])
        dec = make_text_decoder(cid)
        ours = [dec(bytes.fromhex(h)) for h in stored]
        if cs in ("utf8mb3", "utf8mb4", "utf16", "utf16le", "utf32", "ucs2"):
            assert all(type(o) is str for o in ours), cs
        assert ours == server, cs
        checked.append(cs)
    assert {"eucjpms", "ujis", "sjis", "cp932", "euckr", "gb2312", "gbk", "big5", "utf8mb4",
            "utf16", "utf32", "ucs2", "utf16le", "utf8mb3"} <= set(checked)


CHARSETS = ["latin1", "latin2", "cp1251", "koi8r", "armscii8", "geostd8", "keybcs2", "swe7",
            "dec8", "hp8", "greek", "hebrew", "tis620", "macroman", "cp866", "ascii", "sjis",
            "cp932", "ujis", "eucjpms", "euckr", "gbk", "gb2312", "big5", "ucs2", "utf16",
            "utf16le", "utf32", "utf8mb3", "utf8mb4"]
TEXT = "Aé€Жук ①Ⅰ 日本 한 中 😀 ¥ ä"
ENUM_SETS = ["latin1", "ucs2", "utf16", "utf32", "cp1251", "utf8mb4", "eucjpms", "sjis"]
MEMBERS = ["é", "Жук", "①", "日本", "a,b" if False else "ab", "ü€"]


def test_text_columns_and_enum_set_members_equal_select(mariadb, db, binlog_snapshot,
                                                        row_decoder):
    start_file = mariadb.current_position()[0]
    conn = mariadb.connect(database=db)
    cols = [f"c_{cs} VARCHAR(40) CHARACTER SET {cs}" for cs in CHARSETS]
    cols += [f"t_{cs} TEXT CHARACTER SET {cs}" for cs in ("latin1", "eucjpms", "utf16")]
    with conn.cursor() as cur:
        # the members each set can hold (the server turns the others into '?': skip those)
        members = {}
        for cs in ENUM_SETS:
            ok = []
            for m in MEMBERS:
                cur.execute(f"SELECT CONVERT(CONVERT(%s USING {cs}) USING utf8mb4)", (m,))
                if cur.fetchone()[0] == m:
                    ok.append(m)
            members[cs] = ok
        quoted = {cs: ", ".join(conn.escape(m) for m in ms) for cs, ms in members.items()}
        cols += [f"e_{cs} ENUM({quoted[cs]}) CHARACTER SET {cs}" for cs in ENUM_SETS]
        cols += [f"s_{cs} SET({quoted[cs]}) CHARACTER SET {cs}" for cs in ENUM_SETS]
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, " + ", ".join(cols) + ")")
        names = ["id"] + [c.split()[0] for c in cols]
        text_cols = [n for n in names if n[:2] in ("c_", "t_")]
        values = {n: TEXT for n in text_cols}
        for cs in ENUM_SETS:
            values[f"e_{cs}"] = members[cs][-1]
            values[f"s_{cs}"] = ",".join(members[cs][:3])
        cur.execute("SET sql_mode = ''")   # what a set cannot hold is stored as '?'
        cur.execute(f"INSERT INTO t (id, {', '.join(values)}) VALUES "
                    f"(1, {', '.join(['%s'] * len(values))})", list(values.values()))
        cur.execute(f"INSERT INTO t (id, {', '.join(values)}) VALUES "
                    f"(2, {', '.join(['%s'] * len(values))})",
                    ["x" if n[:2] in ("c_", "t_") else "" for n in values])
        cur.execute("UPDATE t SET c_latin1 = 'ÿ€', e_latin1 = %s WHERE id = 2",
                    (members["latin1"][0],))
        cur.execute("SELECT " + ", ".join(names) + " FROM t ORDER BY id")
        expected = [tuple(r) for r in cur.fetchall()]
    files = binlog_snapshot(since_file=start_file)
    changes = [c for tx in assemble(read_events(files)) for c in tx.changes()
               if c.schema == db and c.table == "t"]
    final = {}
    for c in changes:
        final[c.after[0]] = c.after
    got = [final[1], final[2]]
    for row_got, row_exp in zip(got, expected):
        for n, g, e in zip(names, row_got, row_exp):
            assert g == e and type(g) is type(e), (n, g, e)
    # what the server made '?' of is '?' in the decoded row too
    assert "?" in final[1][names.index("c_latin2")]


def test_query_text_of_a_latin1_connection(mariadb, db, binlog_snapshot, row_decoder):
    start_file = mariadb.current_position()[0]
    conn = mariadb.connect(database=db, charset="latin1")
    sql = "CREATE TABLE lat (c VARCHAR(10) CHARACTER SET utf8mb4 DEFAULT 'éÿ€ß')"
    with conn.cursor() as cur:
        cur.execute(sql)
    with mariadb.connect(database=db).cursor() as cur:
        cur.execute("SELECT column_default FROM information_schema.columns WHERE "
                    "table_schema = %s AND table_name = 'lat'", (db,))
        assert cur.fetchone()[0] == "'éÿ€ß'"      # the server read it as latin1 text
    queries = [ev.query for ev in read_events(binlog_snapshot(since_file=start_file))
               if isinstance(ev, QueryEvent) and "CREATE TABLE lat" in ev.query]
    assert len(queries) == 1 and "DEFAULT 'éÿ€ß'" in queries[0]
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in queries[0])


def test_invalid_text_in_typed_arrow_and_json(row_decoder):
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    from streaming.contract.spark_schema import spark_column
    from cdc.binlog.constants import ColumnType as T
    from cdc.values.types import ColumnDef

    col = ColumnDef(0, T.VARCHAR, 40, True)
    col.collation = 45
    value = make_text_decoder(45)(b"A\xc3")
    assert value == b"A\xc3" and type(value) is InvalidText
    conv = spark_column(col).convert
    arr = pa.array([conv(value), conv("é")], pa.string())
    assert arr.to_pylist() == ['{"$binary": "QcM="}', "é"]
