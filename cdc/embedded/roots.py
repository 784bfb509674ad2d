"""The servers the tests and demos can start by name, and where their private roots are."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cdc.embedded.mariadb import EmbeddedMariaDB
from cdc.embedded.mysql import EmbeddedMySQL
from cdc.errors import ConfigurationError

__all__ = ["SERVERS", "server_root", "embedded_server"]

SERVERS = ("mariadb-10.11", "mariadb-11.8", "mysql-9.7")
"""The servers :func:`embedded_server` starts: the machine's ``mariadbd`` (Debian 12's 10.11),
and the private roots ``tools/server_root.sh`` makes."""

_ROOTS_ENV = "BINLOG_CDC_SERVER_ROOTS"


def server_root(name: str) -> Path:
    """The private root of server ``name`` (``mariadb-11.8``, ``mysql-9.7``).

    Looked up in ``$BINLOG_CDC_SERVER_ROOTS/<name>``, then ``~/.cache/binlog-cdc/servers/<name>``
    (where ``tools/server_root.sh`` puts it).  Raises :class:`ConfigurationError` naming the
    command that makes it when neither is complete.
    """
    bases = [os.environ[_ROOTS_ENV]] if os.environ.get(_ROOTS_ENV) else []
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    bases.append(os.path.join(cache, "binlog-cdc", "servers"))
    for base in bases:
        root = Path(base) / name
        if (root / ".complete").is_file() and (root / "run").is_dir():
            return root
    raise ConfigurationError(
        f"no private root for {name} in {' or '.join(bases)}: make it with "
        f"`tools/server_root.sh {name}` (downloads Debian's packages, installs nothing "
        f"system-wide)")


def embedded_server(name: str, **kwargs: Any) -> "EmbeddedMariaDB":
    """A new (not yet started) embedded server of one of :data:`SERVERS`."""
    if name not in SERVERS:
        raise ConfigurationError(f"unknown embedded server {name!r}; one of {', '.join(SERVERS)}")
    if name == "mariadb-10.11":
        return EmbeddedMariaDB(**kwargs)
    if name.startswith("mariadb-"):
        return EmbeddedMariaDB(root=server_root(name), **kwargs)
    return EmbeddedMySQL(root=server_root(name), **kwargs)
