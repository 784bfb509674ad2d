"""A job runner's config file (streaming.apps.job) for a test's server: the ``[source]`` of
*server*'s cdc account (its password read from an environment variable the caller sets), the
``[delta]`` and ``[stream]`` sections, as a user writes them."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_job_toml(path: Path, server, include: str, start, *, password_env: str, delta: Path,
                   app_id: str, checkpoint: Path, trigger: str, source_extra: str = "",
                   stream_extra: str = "", user: str | None = None,
                   port: int | None = None) -> Path:
    """*path* holding the config: *include* the includeTables, *start* ``(file, pos)`` or a
    startingPosition word (``"snapshot"``), *user* another account than the cdc one, *port*
    another port than the server's (a relay in front of it); *stream_extra* follows the
    ``[stream]`` section (its keys, or further sections)."""
    p = {**server.cdc_params(), **({"port": port} if port else {})}
    position = f'"{start}"' if isinstance(start, str) else \
        f'{{file = "{start[0]}", pos = {start[1]}}}'
    path.write_text(textwrap.dedent(f"""\
        [source]
        host = "{p['host']}"
        port = {p['port']}
        user = "{user or p['user']}"
        password_env = "{password_env}"
        includeTables = "{include}"
        startingPosition = {position}
        """) + source_extra + textwrap.dedent(f"""
        [delta]
        path = "{delta}"
        app_id = "{app_id}"

        [stream]
        checkpoint = "{checkpoint}"
        trigger = "{trigger}"
        """) + stream_extra)
    return path
