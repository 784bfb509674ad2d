"""``binlog-cdc tail --schema-file FILE``: the schema history kept across runs.

Without ``binlog_row_metadata=FULL`` rows take their column names, character sets and members
from the schema history (:mod:`cdc.schema`). A tail that stops writes the history as of the
position it prints to resume from into FILE (JSON: that position and the history there); a tail
started with the same FILE and those resume options continues with it instead of reading
information_schema again -- so rows written before a DDL statement that ran while it was stopped
keep the columns of their time. FILE is written atomically (a temporary file renamed over it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cdc.errors import ConfigurationError
from cdc.positions import Position, Start
from cdc.replica.history_state import restore_history, saved_history, use_history

__all__ = ["load_schema_file", "save_schema_file"]


def _matches(saved: dict, start: Start) -> bool:
    if start.kind == "file":
        return (saved.get("file"), saved.get("pos")) == (start.file, start.pos)
    if start.is_gtid and saved.get("gtid") is not None:
        try:
            return Start.parse(str(saved["gtid"])).gtid == start.gtid
        except ConfigurationError:
            return False
    return False


def load_schema_file(path: str, client, start: Start) -> bool:
    """Make *client* continue from the history saved in *path* for *start*; False when there is
    no file yet (the history is then read from information_schema, as without the option)."""
    p = Path(path)
    if not p.exists():
        return False
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        saved, state = data["position"], data["schema"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(f"--schema-file {path}: not a schema file written by binlog-cdc "
                                 f"tail ({e}); remove it to read the schema history from "
                                 f"information_schema again") from None
    if not _matches(saved, start):
        where = Position.from_offset(saved)
        raise ConfigurationError(
            f"--schema-file {path} holds the schema history at {where}, but tail starts at "
            f"{start.describe()}: resume with the "
            f"options tail printed when it stopped ({where.cli_args()}), or remove the file to "
            f"read the history from information_schema again")
    if state is not None:
        use_history(client, restore_history(client, state))
    return True


def save_schema_file(path: str, client, resume: Position) -> None:
    """Write the client's history as of *resume* (the position tail prints to resume from)."""
    data = {"position": resume.to_offset(),
            "schema": saved_history(client, resume.file, resume.pos)}
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, p)
