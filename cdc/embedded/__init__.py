"""A private, throw-away MariaDB server for tests and demos.

:class:`EmbeddedMariaDB` initialises a data directory with ``mariadb-install-db``, starts
``mariadbd`` on ``127.0.0.1`` with a row-based binary log (``binlog_format=ROW``,
``binlog_row_image=FULL``, ``binlog_row_metadata=FULL``) and creates a replication user
(:attr:`EmbeddedMariaDB.CDC_USER` / :attr:`EmbeddedMariaDB.CDC_PASSWORD`) plus a
``cdc_test`` database::

    from cdc.embedded import EmbeddedMariaDB

    with EmbeddedMariaDB() as server:
        server.execute("CREATE TABLE cdc_test.t (id INT PRIMARY KEY, v TEXT)")
        server.execute("INSERT INTO cdc_test.t VALUES (1, 'a')")
        print(server.current_position(), server.binlog_files())

The server only needs the Debian/Ubuntu ``mariadb-server`` package; no Docker, no root
(when run as root it is started with ``--user=root``).

:class:`EmbeddedMySQL` does the same for MySQL (``mysqld --initialize-insecure``, GTID mode
on).  Both also run a server from a *private root*: a directory that
``tools/server_root.sh`` filled with a newer Debian suite's server packages and the
libraries they need, whose ``run/`` wrappers start each program under the root's own loader,
so nothing is installed system-wide.  :func:`embedded_server` starts one by name
(:data:`SERVERS`: ``mariadb-10.11`` is the machine's own ``mariadbd``; ``mariadb-11.8`` and
``mysql-9.7`` are private roots found by :func:`server_root`).  Every started server is stopped
at interpreter exit.  This module is library code: it does not import pytest or Spark
and writes nothing to stdout.
"""

from cdc.embedded.mariadb import EmbeddedMariaDB
from cdc.embedded.mysql import EmbeddedMySQL
from cdc.embedded.process import find_executable, free_port
from cdc.embedded.roots import SERVERS, embedded_server, server_root
from cdc.errors import EmbeddedServerError

__all__ = ["EmbeddedMariaDB", "EmbeddedMySQL", "EmbeddedServerError", "SERVERS", "embedded_server",
           "server_root", "free_port", "find_executable"]
