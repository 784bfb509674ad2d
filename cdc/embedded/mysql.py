"""A private MySQL server (``mysqld`` 8.0+) with a row-based binlog and GTID mode on."""

from __future__ import annotations

from typing import Any

from cdc.embedded.mariadb import EmbeddedMariaDB
from cdc.embedded.process import find_executable, running_as_root
from cdc.errors import ConfigurationError

__all__ = ["EmbeddedMySQL"]


class EmbeddedMySQL(EmbeddedMariaDB):
    """A private MySQL ``mysqld`` (8.0+) with a row-based binlog and GTID mode on.

    The same interface as :class:`EmbeddedMariaDB`; the datadir is made with
    ``mysqld --initialize-insecure`` (root@localhost without a password), the X plugin is off
    and ``secure_file_priv`` is empty.  Normally run from a private root
    (``EmbeddedMySQL(root=server_root("mysql-9.7"))``); without one, ``mysqld`` is looked up
    on the system (``$MYSQLD``).
    """

    FLAVOR = "mysql"
    SERVER_BINARY = "mysqld"

    def _server_binary(self) -> str:
        if self.root is not None:
            return super()._server_binary()
        found = find_executable(["mysqld"], env_var="MYSQLD")
        if found is None:
            raise ConfigurationError(
                "the MySQL server binary `mysqld` was not found; make a private root with "
                "`tools/server_root.sh mysql-9.7` or point MYSQLD at the binary")
        return found

    def _install_command(self, mysqld: str) -> list[str]:
        cmd = [mysqld, "--no-defaults", "--initialize-insecure", f"--datadir={self._datadir}",
               f"--tmpdir={self._tmpdir()}"]
        if self.root is not None:
            cmd += [f"--basedir={self.root / 'run'}",
                    f"--lc-messages-dir={self.root / 'run' / 'share' / 'mysql'}"]
        if running_as_root():
            cmd.append("--user=root")
        return cmd

    def _prepare_datadir(self) -> None:
        # mysqld --initialize wants to create the datadir itself
        if self._datadir.exists() and not any(self._datadir.iterdir()):
            self._datadir.rmdir()
        self._datadir.parent.mkdir(parents=True, exist_ok=True)

    def _share_name(self) -> str:
        return "mysql"

    def seq_table(self, last: int, first: int = 1) -> str:
        """The integers first..last in column ``seq`` (MySQL has no sequence engine: a
        JSON_TABLE)."""
        first, n = int(first), int(last) - int(first) + 1
        return (f"(SELECT o + {first - 1} AS seq FROM JSON_TABLE(CONCAT('[', REPEAT('0,', "
                f"{n - 1}), '0]'), '$[*]' COLUMNS (o FOR ORDINALITY)) AS jt) AS seq_{first}_{n}")

    def gtid_executed(self) -> str:
        return str(self.execute("SELECT @@GLOBAL.gtid_executed")[0][0]).replace("\n", "")

    def _flavour_options(self) -> dict[str, Any]:
        return {"gtid_mode": "ON", "enforce_gtid_consistency": "ON", "mysqlx": "OFF",
                "secure_file_priv": "", "innodb_redo_log_capacity": "64M", "sync_binlog": 0,
                "performance_schema": "ON"}

    def _grants(self) -> str:
        return "REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD, PROCESS, SHOW DATABASES"
