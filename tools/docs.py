"""The generated tables of the docs: ``python -m tools.docs`` rewrites them in place, ``python -m
tools.docs --check`` exits 1 when a doc differs from what the code says (tests/unit/test_docs.py
runs the check).

A generated table stands between ``<!-- generated: NAME (python -m tools.docs) -->`` and
``<!-- end generated -->``; NAME is a key of :data:`TABLES`. The knowledge stays with its owner:

* ``options``: :data:`streaming.source.options.OPTIONS` (docs/source.md);
* ``types``: typed mode's Spark types (:data:`streaming.contract.spark_schema.SPARK_TYPES`) and
  the Delta upserter's types (:func:`streaming.sinks.delta.types.delta_spark_type`), for the MySQL
  column types of :data:`TYPE_EXAMPLES` (docs/types.md);
* ``grants``: :func:`cdc.replica.server.grant_statement` per tested server (docs/server-setup.md).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: MySQL column types shown in the type-mapping table, as a CREATE TABLE would write them
TYPE_EXAMPLES = (
    "TINYINT", "TINYINT UNSIGNED", "SMALLINT", "SMALLINT UNSIGNED", "MEDIUMINT", "INT",
    "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED", "FLOAT", "DOUBLE", "DECIMAL(12,2)",
    "DECIMAL(65,30)", "YEAR", "DATE", "TIME(6)", "DATETIME(6)", "TIMESTAMP(3)", "BIT(1)",
    "BIT(64)", "CHAR(10)", "VARCHAR(255)", "TEXT", "BINARY(16)", "VARBINARY(255)", "BLOB",
    "ENUM('a','b')", "SET('x','y')", "JSON", "GEOMETRY", "VECTOR(3)",
)

#: the tested servers (docs/server-setup.md) and the version text their handshake gives
SERVERS = (("MariaDB 10.11", "10.11.19-MariaDB"), ("MariaDB 11.8", "11.8.9-MariaDB"),
           ("MySQL 9.7", "9.7.4"))


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.M | re.S)


def fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """(info string, body) of each fenced block of a markdown file."""
    return [(m.group(1).strip(), m.group(2)) for m in _FENCE.finditer(path.read_text())]


def runnable(info: str, lang: str) -> list[str] | None:
    """The words after ``runnable`` when the info string *info* marks a runnable block of
    *lang* (```` ```bash runnable ````, ```` ```sql runnable mariadb ````), else None."""
    words = info.split()
    if len(words) >= 2 and words[0] == lang and words[1] == "runnable":
        return words[2:]
    return None


def options_table() -> str:
    from streaming.source.options import OPTIONS
    lines = [_row(["option", "required", "type", "default", "applies to", "meaning"]),
             _row(["---"] * 6)]
    for name, o in OPTIONS.items():
        lines.append(_row([f"`{name}`", o.required or "no", o.type,
                           f"`{o.default}`" if o.default else "-", ", ".join(o.applies),
                           o.meaning]))
    return "\n".join(lines)


def types_table() -> str:
    from streaming._compat import to_arrow_type
    from streaming.contract.spark_schema import spark_column
    from streaming.sinks.delta.ddl import record_columns
    from streaming.sinks.delta.types import delta_spark_type
    lines = [_row(["MySQL / MariaDB", "Spark (typed mode, flat layout)", "Arrow",
                   "Delta (DeltaUpserter)"]), _row(["---"] * 4)]
    for text in TYPE_EXAMPLES:
        charset = "binary" if re.match(r"(BINARY|VARBINARY|BLOB)", text) else None
        col = record_columns({"columns": [{"name": "c", "type": text, "charset": charset}],
                              "primary_key": []})[0]
        spark = spark_column(col).spark
        delta = delta_spark_type(col)
        arrow = to_arrow_type(spark, timezone="UTC")
        lines.append(_row([f"`{text}`", f"`{spark.simpleString()}`", f"`{arrow}`",
                           f"`{delta.simpleString()}`"]))
    return "\n".join(lines)


def grants_table() -> str:
    from cdc.replica.server import grant_statement, parse_server_version
    lines = [_row(["server", "replication (stream, batch, snapshot)",
                   "tables (snapshot, typed mode, metadata)"]), _row(["---"] * 3)]
    for name, version in SERVERS:
        grant = grant_statement(parse_server_version(version), "'cdc'@'%'")
        lines.append(_row([name, f"`{grant}`", "`GRANT SELECT ON shop.* TO 'cdc'@'%';`"]))
    return "\n".join(lines)


TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "options": ("source.md", options_table),
    "types": ("types.md", types_table),
    "grants": ("server-setup.md", grants_table),
}
_BLOCK = re.compile(r"(<!-- generated: (\w+) \(python -m tools\.docs\) -->\n)(.*?)(<!-- end "
                    r"generated -->)", re.S)


def render(text: str, only: str | None = None) -> str:
    """*text* with each generated block rewritten (or only the block *only*)."""
    def sub(m):
        name = m.group(2)
        if name not in TABLES or (only and name != only):
            return m.group(0)
        return m.group(1) + TABLES[name][1]() + "\n" + m.group(4)
    return _BLOCK.sub(sub, text)


def stale(docs: Path = DOCS) -> list[str]:
    """The generated tables that differ from the code (``file: name``), or are missing."""
    out = []
    for name, (file, _make) in TABLES.items():
        path = docs / file
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if f"<!-- generated: {name} " not in text:
            out.append(f"{file}: no generated table {name!r}")
        elif render(text, name) != text:
            out.append(f"{file}: table {name!r} differs from the code (run python -m tools.docs)")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        problems = stale()
        for p in problems:
            print(p)
        return 1 if problems else 0
    for file in sorted({f for f, _ in TABLES.values()}):
        path = DOCS / file
        text = path.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
