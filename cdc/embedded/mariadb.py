"""A private MariaDB server (``mariadbd``) with a row-based binlog on 127.0.0.1: the machine's
own, or one of a private root made by ``tools/server_root.sh``."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import pymysql

from cdc.embedded.process import (INSTALL_HINT, die_with_parent_fn, find_executable, free_port,
                                  log_tail, option_key, running_as_root)
from cdc.errors import ConfigurationError, EmbeddedServerError
from cdc.replica.server import ServerInfo, parse_server_version
from cdc.replica.sql import binlog_status, fetch_rows

__all__ = ["EmbeddedMariaDB"]

_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 107 bytes on Linux


class EmbeddedMariaDB:
    """A private ``mariadbd`` with a row-based binlog, listening on ``127.0.0.1``.

    ``basedir`` holds ``my.cnf``, the error log, the pid file, the socket (unless the path
    is too long for a Unix socket) and ``data/``.  When it is ``None`` a temporary
    directory is created and :meth:`cleanup` removes it.  ``extra_options`` are added to
    (and override) the ``[mysqld]`` options; a value of ``None`` or ``True`` writes a bare
    flag, ``False`` leaves the option out.
    """

    FLAVOR = "mariadb"
    SERVER_BINARY = "mariadbd"
    CDC_USER = "cdc"
    CDC_PASSWORD = "cdc-secret"
    ROOT_USER = "root"
    ROOT_PASSWORD = ""
    TEST_DATABASE = "cdc_test"
    HOST = "127.0.0.1"
    CLIENT_MAX_ALLOWED_PACKET = 64 * 1024 * 1024

    def __init__(self, basedir: str | Path | None = None, *, port: int | None = None,
                 server_id: int = 1, extra_options: Mapping[str, Any] | None = None,
                 log_bin_basename: str = "mysql-bin", startup_timeout: float = 60.0,
                 root: str | Path | None = None):
        self.root = Path(root) if root is not None else None
        self._own_basedir = basedir is None
        if basedir is None:
            basedir = tempfile.mkdtemp(prefix=f"cdc-{self.FLAVOR}-")
        self.basedir = Path(basedir).absolute()
        self._auto_port = port is None
        self._port = port if port is not None else free_port(self.HOST)
        self.server_id = int(server_id)
        self.extra_options = dict(extra_options or {})
        self.log_bin_basename = log_bin_basename
        self.startup_timeout = float(startup_timeout)

        self._datadir = self.basedir / "data"
        self.cnf_path = self.basedir / "my.cnf"
        self.error_log = self.basedir / "mariadbd.err"
        self.pid_file = self.basedir / "mariadbd.pid"
        self._stdio_log = self.basedir / "mariadbd.out"
        sock = self.basedir / "mariadbd.sock"
        self._socket_dir: Path | None = None
        if len(str(sock)) > _MAX_SOCKET_PATH:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="cdcsock-"))
            sock = self._socket_dir / "mariadbd.sock"
        self._socket = sock

        self._proc: subprocess.Popen | None = None
        self._version: str | None = None
        self._provisioned = False
        self._conns: dict[str | None, pymysql.connections.Connection] = {}
        self._lock = threading.RLock()
        self._atexit_registered = False

    # --- context manager ------------------------------------------------------------------

    def __enter__(self) -> "EmbeddedMariaDB":
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return (f"<{type(self).__name__} {self.HOST}:{self._port} {state} "
                f"datadir={self._datadir}>")

    # --- properties -----------------------------------------------------------------------

    @property
    def host(self) -> str:
        return self.HOST

    @property
    def port(self) -> int:
        return self._port

    @property
    def socket(self) -> str:
        return str(self._socket)

    @property
    def datadir(self) -> Path:
        return self._datadir

    @property
    def log_bin_path(self) -> Path:
        """The ``log-bin`` base path: binlog files are ``<this>.000001`` and so on."""
        return self._datadir / self.log_bin_basename

    @property
    def version(self) -> str:
        """``SELECT VERSION()`` of the running server (e.g. ``10.11.6-MariaDB-log``)."""
        if self._version is None:
            self._version = self.execute("SELECT VERSION()")[0][0]
        return self._version

    @property
    def server_info(self) -> ServerInfo:
        """The running server's flavour and version."""
        return parse_server_version(self.version)

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        return self.server_info.version

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # --- connection parameters ------------------------------------------------------------

    def root_params(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` as the (password-less) root user."""
        return {"host": self.HOST, "port": self._port, "user": self.ROOT_USER,
                "password": self.ROOT_PASSWORD}

    def cdc_params(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` as the replication user."""
        return {"host": self.HOST, "port": self._port, "user": self.CDC_USER,
                "password": self.CDC_PASSWORD}

    def connect(self, user: str = "root", database: str | None = None,
                **kw: Any) -> pymysql.connections.Connection:
        """A new autocommit PyMySQL connection (utf8mb4, 64 MiB max packet) over TCP."""
        if user == self.ROOT_USER:
            params = self.root_params()
        elif user == self.CDC_USER:
            params = self.cdc_params()
        else:
            params = {"host": self.HOST, "port": self._port, "user": user}
        params.update(charset="utf8mb4", autocommit=True, connect_timeout=10,
                      max_allowed_packet=self.CLIENT_MAX_ALLOWED_PACKET)
        if database is not None:
            params["database"] = database
        params.update(kw)
        return pymysql.connect(**params)

    def execute(self, sql: str, params: Any = None,
                database: str | None = None) -> list[tuple]:
        """Run one statement as root on a cached connection; return all rows (or ``[]``)."""
        with self._lock:
            conn = self._conns.get(database)
            if conn is not None:
                try:
                    conn.ping(reconnect=False)
                except Exception:
                    self._close_quietly(conn)
                    conn = None
            if conn is None:
                conn = self.connect(database=database)
                self._conns[database] = conn
            return fetch_rows(conn, sql, params)

    def _close_connections(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            self._close_quietly(c)

    @staticmethod
    def _close_quietly(conn: Any) -> None:
        with contextlib.suppress(Exception):
            conn.close()

    def seq_table(self, last: int, first: int = 1) -> str:
        """A table expression of the integers first..last in column ``seq``, for
        ``INSERT ... SELECT`` test data (MariaDB's sequence engine)."""
        return f"seq_{int(first)}_to_{int(last)}"

    def gtid_executed(self) -> str:
        """Every transaction the server has binlogged, in its own GTID notation
        (``@@gtid_binlog_pos`` here, ``@@gtid_executed`` on MySQL)."""
        return str(self.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])

    # --- binlog helpers -------------------------------------------------------------------

    def binlog_files(self) -> list[Path]:
        """The server's binlog files (``SHOW BINARY LOGS``) as paths, oldest first."""
        return [self.log_bin_path.parent / row[0] for row in self.execute("SHOW BINARY LOGS")]

    def flush_binary_logs(self) -> None:
        """Close the current binlog file and open the next one."""
        self.execute("FLUSH BINARY LOGS")

    def purge_binary_logs(self, to: str, timeout: float = 30.0) -> None:
        """``PURGE BINARY LOGS TO`` *to*, again until *to* is the oldest binlog: MariaDB keeps,
        without an error, a file its binlog checkpoint still needs (just after a rotation).
        TimeoutError when that takes more than *timeout* seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self.execute(f"PURGE BINARY LOGS TO '{to}'")
            left = [row[0] for row in self.execute("SHOW BINARY LOGS")]
            if left and left[0] == to:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"PURGE BINARY LOGS TO '{to}' left {left} after "
                                   f"{timeout:g} s")
            time.sleep(0.1)

    def current_position(self) -> tuple[str, int]:
        """``(file name, position)`` where the next event will be written."""
        end = binlog_status(self.execute, self.server_info)
        return end.file, end.pos

    def snapshot_binlogs(self, dest: str | Path, since_file: str | None = None) -> list[Path]:
        """``FLUSH BINARY LOGS`` then copy every closed binlog file into ``dest``.

        The new, still open file is not copied.  ``since_file`` (a file name as returned by
        :meth:`current_position`) skips the files before it.  Returns the copies, oldest
        first.
        """
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self.flush_binary_logs()
            files = self.binlog_files()[:-1]
        if since_file is not None:
            files = [f for f in files if f.name >= Path(since_file).name]
        out = []
        for f in files:
            target = dest / f.name
            shutil.copyfile(f, target)
            out.append(target)
        return out

    # --- lifecycle ------------------------------------------------------------------------

    def program(self, name: str) -> str | None:
        """The path of one of the server's programs (``mariadb-binlog``, ``mysqlbinlog``...):
        the private root's wrapper when the server runs from one, else found on the system."""
        if self.root is not None:
            for sub in ("run/sbin", "run/bin", "usr/bin"):
                candidate = self.root / sub / name
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
            return None
        return find_executable([name])

    def _server_binary(self) -> str:
        if self.root is not None:
            found = self.program(self.SERVER_BINARY)
            if found is None:
                raise ConfigurationError(f"{self.root} has no {self.SERVER_BINARY}: make it again "
                                         f"with tools/server_root.sh")
            return found
        mariadbd = find_executable(["mariadbd"], env_var="MARIADBD")
        if mariadbd is None:
            raise ConfigurationError(
                "the MariaDB server binary `mariadbd` was not found on PATH, in /usr/sbin or "
                f"in /usr/libexec; {INSTALL_HINT}")
        return mariadbd

    def start(self) -> "EmbeddedMariaDB":
        """Initialise the datadir if needed, start the server and wait until it answers."""
        if self.is_running():
            return self
        mariadbd = self._server_binary()
        self.basedir.mkdir(parents=True, exist_ok=True)
        if not (self._datadir / "mysql").is_dir():
            self._install_db(mariadbd)
        if not self._atexit_registered:
            atexit.register(self._at_exit)
            self._atexit_registered = True

        attempts = 3 if self._auto_port else 1
        for attempt in range(attempts):
            self._write_cnf()
            self._spawn(mariadbd)
            try:
                self._wait_ready()
                break
            except EmbeddedServerError:
                log = log_tail(self.error_log)
                self.kill()
                if attempt + 1 < attempts and "Address already in use" in log:
                    self._port = free_port(self.HOST)
                    continue
                raise
        self._version = None
        try:
            self._provision()
        except BaseException:
            self.kill()
            raise
        return self

    def _install_command(self, mariadbd: str) -> list[str]:
        if self.root is not None:
            # a shell script: with --basedir it runs run/sbin/mariadbd, the loader's wrapper
            install = self.root / "usr" / "bin" / "mariadb-install-db"
            base = [str(install), f"--basedir={self.root / 'run'}"]
        else:
            found = find_executable(["mariadb-install-db", "mysql_install_db"],
                                    extra_dirs=[os.path.dirname(mariadbd),
                                                os.path.join(os.path.dirname(mariadbd), "..",
                                                             "bin")])
            if found is None:
                raise ConfigurationError(
                    f"`mariadb-install-db` was not found (mariadbd is {mariadbd}); "
                    f"{INSTALL_HINT}")
            base = [found]
        cmd = [base[0], "--no-defaults", *base[1:], f"--datadir={self._datadir}",
               f"--tmpdir={self._tmpdir()}", "--auth-root-authentication-method=normal",
               "--skip-test-db"]
        if running_as_root():
            cmd.append("--user=root")
        return cmd

    def _install_db(self, binary: str) -> None:
        cmd = self._install_command(binary)
        fresh = not self._datadir.exists() or not any(self._datadir.iterdir())
        self._prepare_datadir()
        log = self.basedir / "install-db.log"
        with open(log, "wb") as out:
            try:
                rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=180,
                                    cwd=self.basedir).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0:
            if fresh:  # do not leave a half-initialised datadir that start() would trust
                shutil.rmtree(self._datadir, ignore_errors=True)
            raise EmbeddedServerError(
                f"`{' '.join(cmd)}` failed ({rc}); its output ends with:\n{log_tail(log)}")

    def _prepare_datadir(self) -> None:
        self._datadir.mkdir(parents=True, exist_ok=True)

    def _options(self) -> dict[str, Any]:
        """The ``[mysqld]`` options: where things are, a ROW binlog with FULL images and
        metadata, small buffers, then the flavour's own (:meth:`_flavour_options`), then
        ``extra_options``."""
        opts: dict[str, Any] = {
            "datadir": self._datadir,
            "bind_address": self.HOST,
            "port": self._port,
            "socket": self._socket,
            "pid_file": self.pid_file,
            "tmpdir": self._tmpdir(),
            "log_error": self.error_log,
            "log_bin": self.log_bin_path,
            "binlog_format": "ROW",
            "binlog_row_image": "FULL",
            "binlog_row_metadata": "FULL",
            "server_id": self.server_id,
            "skip_name_resolve": None,
            "innodb_buffer_pool_size": "64M",
            "innodb_flush_log_at_trx_commit": 2,
            "max_allowed_packet": "64M",
            "character_set_server": "utf8mb4",
            "max_connections": 200,
            **self._flavour_options(),
        }
        if self.root is not None:
            opts["basedir"] = self.root / "run"
            opts["lc_messages_dir"] = self.root / "run" / "share" / self._share_name()
        for key, value in self.extra_options.items():
            opts[option_key(key)] = value
        return opts

    def _flavour_options(self) -> dict[str, Any]:
        return {"gtid_strict_mode": "OFF", "innodb_log_file_size": "48M",
                "collation_server": "utf8mb4_general_ci"}

    def _share_name(self) -> str:
        return "mariadb"

    def _tmpdir(self) -> Path:
        """The server's own temporary directory: a server starting up removes the ``#sql*``
        files it finds in its tmpdir, which in a shared /tmp may be another server's."""
        tmp = self.basedir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp

    def _write_cnf(self) -> None:
        lines = [f"# written by cdc.embedded.{type(self).__name__}", "[mysqld]"]
        for key, value in self._options().items():
            if value is False:
                continue
            lines.append(key if value is None or value is True else f"{key}={value}")
        self.cnf_path.write_text("\n".join(lines) + "\n")

    def _spawn(self, mariadbd: str) -> None:
        cmd = [mariadbd, f"--defaults-file={self.cnf_path}"]
        if running_as_root():
            cmd.append("--user=root")
        with contextlib.suppress(FileNotFoundError):
            self._socket.unlink()
        preexec = die_with_parent_fn()
        out = open(self._stdio_log, "ab")
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.basedir, start_new_session=True, preexec_fn=preexec)
        finally:
            out.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                rc = None if self._proc is None else self._proc.returncode
                raise EmbeddedServerError(
                    f"{self.SERVER_BINARY} exited with code {rc} during start-up; the end of "
                    f"{self.error_log}:\n{log_tail(self.error_log)}")
            try:
                conn = self._admin_connection(timeout=2)
            except pymysql.MySQLError as e:
                last = e
                time.sleep(0.1)
                continue
            self._close_quietly(conn)
            return
        raise EmbeddedServerError(
            f"{self.SERVER_BINARY} did not accept connections within {self.startup_timeout:.0f} s "
            f"(last error: {last}); the end of {self.error_log}:\n{log_tail(self.error_log)}")

    def _admin_connection(self, timeout: float = 10) -> pymysql.connections.Connection:
        """Root over the Unix socket (root@localhost always exists), else over TCP."""
        common = dict(user=self.ROOT_USER, password=self.ROOT_PASSWORD, autocommit=True,
                      connect_timeout=timeout, charset="utf8mb4")
        if self._socket.exists():
            try:
                return pymysql.connect(unix_socket=str(self._socket), **common)
            except pymysql.MySQLError:
                pass
        return pymysql.connect(host=self.HOST, port=self._port, **common)

    def _grants(self) -> str:
        """The privileges a CDC replica needs, in this server version's vocabulary."""
        privs = ["REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT", "RELOAD", "PROCESS",
                 "SHOW DATABASES"]
        if self.version_tuple >= (10, 5, 2):
            # 10.5.2 split SUPER / REPLICATION CLIENT: REPLICATION CLIENT is now an alias of
            # BINLOG MONITOR (SHOW BINARY LOGS, SHOW BINLOG STATUS); SHOW SLAVE HOSTS needs
            # REPLICATION MASTER ADMIN, SHOW SLAVE STATUS needs SLAVE MONITOR.
            privs += ["BINLOG MONITOR", "REPLICATION MASTER ADMIN", "SLAVE MONITOR"]
        return ", ".join(privs)

    def _provision(self) -> None:
        if self._provisioned:
            return
        conn = self._admin_connection()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                self._version = cur.fetchone()[0]
                cur.execute("SET SESSION sql_log_bin = 0")  # keep the binlog free of set-up
                cur.execute(f"CREATE USER IF NOT EXISTS `{self.ROOT_USER}`@`127.0.0.1`")
                cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO `{self.ROOT_USER}`@`127.0.0.1` "
                            "WITH GRANT OPTION")
                grants = self._grants()
                for host in ("%", "localhost"):
                    cur.execute(f"CREATE USER IF NOT EXISTS `{self.CDC_USER}`@`{host}` "
                                f"IDENTIFIED BY {conn.escape(self.CDC_PASSWORD)}")
                    cur.execute(f"GRANT {grants} ON *.* TO `{self.CDC_USER}`@`{host}`")
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{self.TEST_DATABASE}`")
        finally:
            self._close_quietly(conn)
        self._provisioned = True

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down cleanly (SIGTERM, then SIGKILL after ``timeout``).

        Idempotent.  :meth:`start` registers an :mod:`atexit` hook that stops the server
        (and removes a temporary basedir) should the caller forget.
        """
        self._close_connections()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=10)
        self._proc = None

    def _at_exit(self) -> None:
        # No server outlives the interpreter; a temporary basedir is removed as well.
        with contextlib.suppress(Exception):
            self.stop(timeout=15)
        if self._own_basedir:
            self.cleanup()

    def kill(self) -> None:
        """SIGKILL the server (simulates a crash; the next :meth:`start` recovers)."""
        self._close_connections()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)
        self._proc = None

    def restart(self) -> "EmbeddedMariaDB":
        """Stop and start again with the same datadir and port (binlogs are kept)."""
        # The port is kept (clients hold on to it); only when it was auto-chosen and has
        # been taken meanwhile ("Address already in use") does start() pick another one.
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        """Stop the server and delete the base directory, if this object created it."""
        self.stop()
        if self._atexit_registered:
            atexit.unregister(self._at_exit)
            self._atexit_registered = False
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
        if self._own_basedir:
            shutil.rmtree(self.basedir, ignore_errors=True)
