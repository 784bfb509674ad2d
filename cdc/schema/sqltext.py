"""SQL text for the DDL parser: executable comments unwrapped, a cheap first-keyword test, tokens
(sqlglot's MySQL tokenizer: quoting, escapes, comments) and a small cursor over them
(:class:`TokenParser`)."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["strip_executable_comments", "ddl_head", "Tok", "tokenize", "Unreadable",
           "TokenParser", "TableName"]


class TableName(NamedTuple):
    db: str | None      # None: the statement's default database
    name: str


# --- text preparation --------------------------------------------------------------------------

def strip_executable_comments(sql: str, version: int | None = None, *,
                              mariadb: bool = True) -> str:
    """*sql* with MySQL's executable comments unwrapped: ``/*!NNNNN text */`` becomes ``text``
    when the server's *version* (``100611`` for 10.6.11; None: any) is at least ``NNNNN``, else
    disappears; ``/*M!NNNNNN text */`` is MariaDB's (MySQL ignores it). Quotes and ordinary
    comments are respected."""
    if "/*" not in sql:
        return sql
    out: list[str] = []
    i, n = 0, len(sql)
    in_exec = False
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and ch != "`":
                    j += 2
                    continue
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
            continue
        if ch == "*" and in_exec and sql.startswith("*/", i):
            out.append(" ")
            in_exec = False
            i += 2
            continue
        if ch == "/" and sql.startswith("/*", i):
            m = re.match(r"/\*(M?)!(\d{5,6})?", sql[i:])
            if m and not in_exec:
                number = int(m.group(2)) if m.group(2) else 0
                run = (mariadb if m.group(1) else True) and (version is None or number <= version)
                if run:
                    in_exec = True
                    out.append(" ")
                    i += m.end()
                else:
                    end = sql.find("*/", i + 2)
                    i = n if end < 0 else end + 2
                    out.append(" ")
                continue
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end])
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_LEADING = re.compile(r"\s+|/\*(?![!M]).*?\*/|/\*M?!\d*|(?:--\s|#)[^\n]*(?:\n|$)", re.S)
_HEAD_WORD = re.compile(r"[A-Za-z]+")
_DDL_HEADS = frozenset({"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"})


def ddl_head(sql: str) -> str | None:
    """The statement's first keyword, upper case, if it may be DDL (ALTER, CREATE, DROP, RENAME,
    TRUNCATE); None otherwise -- cheap, for the many statements that are not."""
    i = 0
    n = len(sql)
    while i < n:
        m = _LEADING.match(sql, i)
        if not m or m.end() == i:
            break
        i = m.end()
    m = _HEAD_WORD.match(sql, i)
    if not m:
        return None
    word = m.group(0).upper()
    return word if word in _DDL_HEADS else None


# --- tokens --------------------------------------------------------------------------------------

class Tok(NamedTuple):
    kind: str       # w(ord) i(dentifier, quoted) s(tring) n(umber) p(unctuation) v(alue literal:
    #                 N'..', _x'..'), x (hex literal x'..'/0x..: its digits), b (bit literal b'..')
    text: str

    @property
    def up(self) -> str:
        return self.text.upper() if self.kind == "w" else ""


_PUNCT = {"L_PAREN": "(", "R_PAREN": ")", "COMMA": ",", "DOT": ".", "SEMICOLON": ";", "EQ": "="}
_VALUES = {"HEX_STRING": "x", "BIT_STRING": "b", "NATIONAL_STRING": "v", "BYTE_STRING": "v",
           "RAW_STRING": "v"}
_tokenizer = None


def _sqlglot_tokenizer():
    """sqlglot's MySQL tokenizer, except that no keyword swallows the rest of the statement as
    one string (its "commands": RENAME, REPLACE, EXECUTE...)."""
    global _tokenizer
    if _tokenizer is None:
        from sqlglot.dialects.mysql import MySQL

        class _Tokenizer(MySQL.Tokenizer):
            COMMANDS: set = set()

        _tokenizer = _Tokenizer()
    return _tokenizer


def tokenize(sql: str, ansi_quotes: bool = False) -> list[Tok]:
    """*sql* as :class:`Tok` tokens (sqlglot's TokenError for an unterminated string/comment);
    with *ansi_quotes* a double-quoted text is a name."""
    out: list[Tok] = []
    for t in _sqlglot_tokenizer().tokenize(sql):
        name = t.token_type.name
        if name == "IDENTIFIER":
            out.append(Tok("i", t.text))
        elif name == "STRING":
            quoted_by = sql[t.start] if t.start < len(sql) else "'"
            out.append(Tok("i" if ansi_quotes and quoted_by == '"' else "s", t.text))
        elif name == "NUMBER":
            out.append(Tok("n", t.text))
        elif name in _VALUES:
            out.append(Tok(_VALUES[name], t.text))
        elif name in _PUNCT:
            out.append(Tok("p", _PUNCT[name]))
        elif t.text and (t.text[0].isalnum() or t.text[0] in "_$"):
            out.extend(Tok("w", w) for w in t.text.split())
        else:
            out.append(Tok("p", t.text))
    return out


class Unreadable(Exception):
    """The statement does not read as the grammar expects."""


class TokenParser:
    """A cursor over tokens with the few moves a recursive-descent parser needs."""

    def __init__(self, toks: list[Tok], *, real_as_float: bool, mariadb: bool):
        self.t = toks
        self.i = 0
        self.real_as_float = real_as_float
        self.mariadb = mariadb

    # -- primitives
    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def up(self, k: int = 0) -> str:
        tok = self.peek(k)
        return tok.up if tok is not None else ""

    def is_p(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind == "p" and tok.text == text

    def at_end(self) -> bool:
        return self.i >= len(self.t) or self.is_p(";")

    def accept(self, *words: str) -> bool:
        for k, w in enumerate(words):
            if self.up(k) != w:
                return False
        self.i += len(words)
        return True

    def accept_p(self, text: str) -> bool:
        if self.is_p(text):
            self.i += 1
            return True
        return False

    def expect_p(self, text: str) -> None:
        if not self.accept_p(text):
            raise Unreadable(f"expected {text!r} at {self._where()}")

    def _where(self) -> str:
        tok = self.peek()
        return "the end" if tok is None else repr(tok.text)

    def name(self) -> str:
        tok = self.peek()
        if tok is None or tok.kind not in ("w", "i"):
            raise Unreadable(f"expected a name at {self._where()}")
        self.i += 1
        return tok.text

    def text_value(self) -> str:
        """A name or a quoted string (character set names, collations)."""
        tok = self.peek()
        if tok is None or tok.kind not in ("w", "i", "s"):
            raise Unreadable(f"expected a name at {self._where()}")
        self.i += 1
        return tok.text

    def qualified(self) -> TableName:
        first = self.name()
        if self.is_p(".") and self.peek(1) is not None and self.peek(1).kind in ("w", "i"):
            self.i += 1
            return TableName(first, self.name())
        return TableName(None, first)

    def if_exists(self) -> bool:
        return self.accept("IF", "EXISTS")

    def if_not_exists(self) -> bool:
        return self.accept("IF", "NOT", "EXISTS")

    def skip_group(self) -> None:
        """Skip a parenthesized group starting at the current ``(``."""
        self.expect_p("(")
        depth = 1
        while depth:
            tok = self.peek()
            if tok is None:
                raise Unreadable("unbalanced parentheses")
            self.i += 1
            if tok.kind == "p":
                if tok.text == "(":
                    depth += 1
                elif tok.text == ")":
                    depth -= 1

    def skip_item(self) -> None:
        """Skip to the next ``,`` or ``)`` at this depth (not consumed), or the end."""
        while not self.at_end() and not self.is_p(",") and not self.is_p(")"):
            if self.is_p("("):
                self.skip_group()
            else:
                self.i += 1

    def skip_value(self) -> None:
        """One value of a DEFAULT/option: a literal, a name, a call, a group."""
        self.accept_p("=")
        while self.is_p("-") or self.is_p("+"):
            self.i += 1
        if self.is_p("("):
            self.skip_group()
            return
        tok = self.peek()
        if tok is None:
            raise Unreadable("a value is missing")
        self.i += 1
        if tok.up == "NEXT" and self.accept("VALUE", "FOR"):
            self.qualified()
            return
        if tok.kind == "w" and tok.text.startswith("_") and self.peek() is not None and \
                self.peek().kind == "s":
            self.i += 1     # _utf8mb4'x'
        while tok.kind == "s" and self.peek() is not None and self.peek().kind == "s":
            self.i += 1     # 'a' 'b' concatenation
        if tok.kind in ("w", "i") and self.is_p("("):
            self.skip_group()   # a call: NOW(), CURRENT_TIMESTAMP(3)
        elif tok.kind in ("w", "i") and self.is_p(".") and self.peek(1) is not None:
            self.i += 2     # NEXT VALUE FOR db.seq, a qualified name

    def number(self) -> int:
        tok = self.peek()
        if tok is None or tok.kind != "n":
            raise Unreadable(f"expected a number at {self._where()}")
        self.i += 1
        return int(float(tok.text))
