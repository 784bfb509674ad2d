"""Collation ids (as found in table-map metadata) -> character set -> Python codec.

The ids are those of MySQL 5.7-9.x and MariaDB 10.x-11.x. A collation id this table does not know
decodes as UTF-8 when the bytes are valid UTF-8, else stays ``bytes`` (nothing is lost).
"""

from __future__ import annotations

BINARY_COLLATION = 63

# charset name -> Python codec (None: binary, keep bytes)
_CODECS = {
    "big5": "big5", "dec8": "latin-1", "cp850": "cp850", "hp8": "latin-1", "koi8r": "koi8_r",
    "latin1": "mysql-latin1", "latin2": "iso8859_2", "swe7": "latin-1", "ascii": "ascii",
    "ujis": "euc_jp", "sjis": "shift_jis", "hebrew": "iso8859_8", "tis620": "tis_620",
    "euckr": "euc_kr", "koi8u": "koi8_u", "gb2312": "gb2312", "greek": "iso8859_7",
    "cp1250": "cp1250", "gbk": "gbk", "latin5": "iso8859_9", "armscii8": "latin-1",
    "utf8mb3": "utf-8", "ucs2": "utf-16-be", "cp866": "cp866", "keybcs2": "latin-1",
    "macce": "mac_latin2", "macroman": "mac_roman", "cp852": "cp852", "latin7": "iso8859_13",
    "utf8mb4": "utf-8", "cp1251": "cp1251", "utf16": "utf-16-be", "utf16le": "utf-16-le",
    "cp1256": "cp1256", "cp1257": "cp1257", "utf32": "utf-32-be", "binary": None,
    "geostd8": "latin-1", "cp932": "cp932", "eucjpms": "euc_jp", "gb18030": "gb18030",
}

_EXPLICIT = {
    1: "big5", 2: "latin2", 3: "dec8", 4: "cp850", 5: "latin1", 6: "hp8", 7: "koi8r", 8: "latin1",
    9: "latin2", 10: "swe7", 11: "ascii", 12: "ujis", 13: "sjis", 14: "cp1251", 15: "latin1",
    16: "hebrew", 18: "tis620", 19: "euckr", 20: "latin7", 21: "latin2", 22: "koi8u", 23: "cp1251",
    24: "gb2312", 25: "greek", 26: "cp1250", 27: "latin2", 28: "gbk", 29: "cp1257", 30: "latin5",
    31: "latin1", 32: "armscii8", 33: "utf8mb3", 34: "cp1250", 35: "ucs2", 36: "cp866",
    37: "keybcs2", 38: "macce", 39: "macroman", 40: "cp852", 41: "latin7", 42: "latin7",
    43: "macce", 44: "cp1250", 45: "utf8mb4", 46: "utf8mb4", 47: "latin1", 48: "latin1",
    49: "latin1", 50: "cp1251", 51: "cp1251", 52: "cp1251", 53: "macroman", 54: "utf16",
    55: "utf16", 56: "utf16le", 57: "cp1256", 58: "cp1257", 59: "cp1257", 60: "utf32",
    61: "utf32", 62: "utf16le", 63: "binary", 64: "armscii8", 65: "ascii", 66: "cp1250",
    67: "cp1256", 68: "cp866", 69: "dec8", 70: "greek", 71: "hebrew", 72: "hp8", 73: "keybcs2",
    74: "koi8r", 75: "koi8u", 76: "utf8mb3", 77: "latin2", 78: "latin5", 79: "latin7", 80: "cp850",
    81: "cp852", 82: "swe7", 83: "utf8mb3", 84: "big5", 85: "euckr", 86: "gb2312", 87: "gbk",
    88: "sjis", 89: "tis620", 90: "ucs2", 91: "ujis", 92: "geostd8", 93: "geostd8", 94: "latin1",
    95: "cp932", 96: "cp932", 97: "eucjpms", 98: "eucjpms", 99: "cp1250",
}

# (first id, last id, charset) — Unicode (UCA) collation blocks. MariaDB's blocks run a little
# further than MySQL's; the extra ids are MariaDB's, unused by MySQL.
_RANGES = (
    (101, 127, "utf16"), (128, 159, "ucs2"), (160, 191, "utf32"), (192, 223, "utf8mb3"),
    (224, 247, "utf8mb4"), (248, 250, "gb18030"), (251, 254, "utf8mb4"), (255, 323, "utf8mb4"),
    (576, 671, "utf8mb3"), (672, 703, "ucs2"), (1024 + 1, 1024 + 99, None),
    (2048, 2303, "utf8mb3"), (2304, 2559, "utf8mb4"), (2560, 2815, "ucs2"),
    (2816, 3071, "utf16"), (3072, 3327, "utf32"),
)


def charset_of(collation_id: int | None) -> str | None:
    """The character set name of a collation id, or None when unknown."""
    if collation_id is None:
        return None
    name = _EXPLICIT.get(collation_id)
    if name is not None:
        return name
    for first, last, cs in _RANGES:
        if first <= collation_id <= last:
            if cs is None:  # MariaDB "nopad" variants: id + 1024 of the padded collation
                return charset_of(collation_id - 1024)
            return cs
    return None


def codec_of(collation_id: int | None) -> str | None:
    """The Python codec for a collation id; None for binary; "utf-8?" when unknown."""
    cs = charset_of(collation_id)
    if cs is None:
        return "utf-8?"
    return _CODECS[cs]


# MySQL's latin1 is cp1252 with the five holes of cp1252 mapped to C1 controls.
_MYSQL_LATIN1 = bytes(range(256)).decode("latin-1")
_cp1252 = []
for _b in range(256):
    try:
        _cp1252.append(bytes((_b,)).decode("cp1252"))
    except UnicodeDecodeError:
        _cp1252.append(_MYSQL_LATIN1[_b])
MYSQL_LATIN1_TABLE = "".join(_cp1252)


def make_text_decoder(collation_id: int | None):
    """A function bytes -> str|bytes for the column's collation (bytes for binary)."""
    codec = codec_of(collation_id)
    if codec is None:
        return bytes
    if codec == "mysql-latin1":
        def dec_latin1(raw):
            return bytes(raw).decode("latin-1").translate(_LATIN1_TRANSLATE)
        return dec_latin1
    if codec == "utf-8?":
        def dec_guess(raw):
            raw = bytes(raw)
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw
        return dec_guess
    if codec == "utf-8":
        def dec_utf8(raw):
            return str(raw, "utf-8", "surrogateescape")
        return dec_utf8

    def dec_other(raw):
        return str(raw, codec, "replace")
    return dec_other


_LATIN1_TRANSLATE = {i: ord(c) for i, c in enumerate(MYSQL_LATIN1_TABLE) if ord(c) != i}
