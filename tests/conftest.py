"""Shared fixtures: a private MariaDB server, scratch databases, binlog snapshots, MySQL 8.4.

* ``mariadb`` (session): a started :class:`cdc.embedded.EmbeddedMariaDB`.  Without
  ``mariadbd`` the tests that use it are skipped, or fail when ``CI`` is set.
* ``mariadb_factory`` (function): ``make(**kwargs)`` starts extra servers for one test.
* ``db`` (function): the name of a fresh, empty database on ``mariadb``; dropped afterwards.
* ``binlog_snapshot`` (function): ``binlog_snapshot(server=None, since_file=None)`` flushes
  the binlog and returns copies of the closed binlog files in a new tmp dir.
* ``spark`` (module): a local SparkSession (``local[2]``), stopped after the module.
* ``mysql84`` (session): a MySQL 8.4 container (GTID on, ROW binlog) when a Docker engine is
  reachable, else the test is skipped.
* ``row_decoder`` (function, autouse): the decoding-heavy modules (:data:`ROW_DECODER_MODULES`)
  run every test twice, ``[c]`` with the compiled row decoder (cdc.rows._rowdecode) and ``[python]``
  with the pure-Python one, made the process default (``cdc.rows.backend.set_default_decoder``:
  what parsers created without ``row_decoder=`` decode with); ``[c]`` is skipped when the
  extension is not built, or fails when ``CI`` is set.  Elsewhere it does nothing.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest


def _worker_python() -> str:
    """What local sessions' workers run (streaming.apps.local_spark.worker_python); the plain
    interpreter without PySpark."""
    try:
        from streaming.apps.local_spark import worker_python
    except ImportError:
        return sys.executable
    return worker_python()


if "PYSPARK_PYTHON" not in os.environ:
    os.environ["PYSPARK_PYTHON"] = _worker_python()

from cdc.embedded import SERVERS, EmbeddedMariaDB, embedded_server  # noqa: E402
from cdc.errors import ConfigurationError  # noqa: E402
from cdc.replica.sql import fetch_rows  # noqa: E402


# --- the private MariaDB server -------------------------------------------------------------


def start_or_skip(server: EmbeddedMariaDB) -> EmbeddedMariaDB:
    """Start ``server``; without ``mariadbd`` skip the test, or fail it when ``CI`` is set."""
    try:
        server.start()
    except ConfigurationError as e:
        server.cleanup()
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the MariaDB server is unavailable: {e}", pytrace=False)
        pytest.skip(f"MariaDB server not available: {e}")
    except BaseException:
        server.cleanup()
        raise
    return server


SERVER_IDS = SERVERS  # "mariadb-10.11", "mariadb-11.8", "mysql-9.7"


def selected_servers(wanted: tuple[str, ...]) -> list[str]:
    """``wanted`` less those that ``CDC_SERVERS`` (comma-separated) leaves out."""
    only = os.environ.get("CDC_SERVERS")
    if not only:
        return list(wanted)
    keep = {s.strip() for s in only.split(",") if s.strip()}
    return [s for s in wanted if s in keep]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "servers(*names): run the test once on each named embedded server "
        "(default all of mariadb-10.11, mariadb-11.8, mysql-9.7); CDC_SERVERS narrows it")


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test of the compatibility suite (``@pytest.mark.compat("feature")``) names its feature
    in the JUnit XML (a ``compat`` property; default: its module), which ``tools.compat_table``
    reads."""
    marker = item.get_closest_marker("compat")
    if marker is not None:
        feature = marker.args[0] if marker.args else item.module.__name__.rpartition(".")[2]
        item.user_properties.append(("compat", feature))


def _servers_of(node: Any) -> tuple[str, ...] | None:
    marker = node.get_closest_marker("servers")
    if marker is None:
        return None
    return tuple(marker.args) or SERVER_IDS


def _named(name: str, **kwargs: Any) -> EmbeddedMariaDB:
    """A new (not started) server *name*; without its root skip the test, or fail it when
    ``CI`` is set."""
    try:
        server = embedded_server(name, **kwargs)
    except ConfigurationError as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {name} is unavailable: {e}", pytrace=False)
        pytest.skip(f"{name} not available: {e}")
    server.server_name = name
    return server


def _start_named(name: str, **kwargs: Any) -> EmbeddedMariaDB:
    return start_or_skip(_named(name, **kwargs))


def gtid_prefix(server) -> str:
    """How the GTIDs of the server's own transactions begin: ``0-1-`` (MariaDB, domain 0,
    server_id 1) or ``<server_uuid>:`` (MySQL)."""
    if server.FLAVOR == "mariadb":
        return f"0-{server.server_id}-"
    return server.execute("SELECT @@server_uuid")[0][0] + ":"


def reference_decoder(server) -> list[str]:
    """The server's own binlog decoder printing row events as pseudo-SQL: ``mariadb-binlog -v``
    or ``mysqlbinlog -v`` (of the server's private root)."""
    name = "mariadb-binlog" if server.FLAVOR == "mariadb" else "mysqlbinlog"
    program = server.program(name)
    if program is None:
        pytest.fail(f"{name} of {server} not found", pytrace=False)
    return [program, "--no-defaults", "-v", "--base64-output=decode-rows"]


@pytest.fixture(scope="session")
def embedded(request: pytest.FixtureRequest):
    """A started embedded server: MariaDB 10.11 (the machine's), unless the test is marked
    ``@pytest.mark.servers(...)``, which runs it once per named server (``[mysql-9.7]``...).
    Every server has the user cdc/cdc-secret, database cdc_test, a ROW binlog with FULL images
    and metadata; MySQL has GTID mode on.  Tests use it as ``server`` or ``mariadb``."""
    yield from _session_server(getattr(request, "param", "mariadb-10.11"))


@pytest.fixture(scope="session")
def server(embedded):
    """The embedded server of the test (see ``embedded``): MariaDB 10.11 unless the test is
    marked ``servers``."""
    return embedded


@pytest.fixture(scope="session")
def mariadb(embedded):
    """The embedded server of the test, by its old name (``embedded``)."""
    return embedded


def _session_server(name: str, **kwargs: Any):
    """A started server of one of :data:`SERVERS` for a session fixture (generator)."""
    started = _start_named(name, **kwargs)
    try:
        yield started
    finally:
        started.cleanup()


@pytest.fixture(scope="session")
def mysql97():
    """A started private MySQL 9.7 (GTID mode on, ROW binlog, FULL metadata)."""
    yield from _session_server("mysql-9.7")


@pytest.fixture(scope="session")
def mariadb118():
    """A started private MariaDB 11.8."""
    yield from _session_server("mariadb-11.8")


@pytest.fixture(scope="session")
def mariadb_nolog(tmp_path_factory: pytest.TempPathFactory):
    """A second private MariaDB whose binlog carries no column metadata
    (``binlog_row_metadata=NO_LOG``, MariaDB's default): table maps without names, charsets or
    keys, which the schema history completes."""
    server = start_or_skip(EmbeddedMariaDB(tmp_path_factory.mktemp("nolog"),
                                           extra_options={"binlog_row_metadata": "NO_LOG"}))
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def mysql97_minimal(tmp_path_factory: pytest.TempPathFactory):
    """A second private MySQL 9.7 with ``binlog_row_metadata=MINIMAL`` (MySQL's default): table
    maps without names, ENUM/SET members or keys, which the schema history completes."""
    yield from _session_server("mysql-9.7", basedir=tmp_path_factory.mktemp("mysql-minimal"),
                               extra_options={"binlog_row_metadata": "MINIMAL"})


METADATA_SERVERS = {"FULL": "mariadb", "NO_LOG": "mariadb_nolog", "mysql-FULL": "mysql97",
                    "mysql-MINIMAL": "mysql97_minimal"}


@pytest.fixture
def metadata_server(request):
    """The test once per binlog_row_metadata level: MariaDB 10.11 FULL (``mariadb``) and NO_LOG
    (``mariadb_nolog``); in a test marked ``servers`` that names MySQL 9.7, also MySQL 9.7 FULL
    (``mysql97``) and MINIMAL (``mysql97_minimal``).  ``CDC_SERVERS`` narrows it."""
    name = "mysql-9.7" if request.param.startswith("mysql") else "mariadb-10.11"
    if not selected_servers((name,)):
        pytest.skip(f"CDC_SERVERS leaves out {name}")
    return request.getfixturevalue(METADATA_SERVERS[request.param])


@pytest.fixture
def mariadb_factory(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """``make(**kwargs) -> EmbeddedMariaDB``: extra, started servers owned by one test, of the
    test's server kind (``embedded``'s parameter; MariaDB 10.11 by default).

    For tests that restart, kill or reconfigure a server (the session ``mariadb`` must stay
    up).  ``kwargs`` go to :class:`EmbeddedMariaDB`; ``basedir`` defaults to a new tmp dir.
    Afterwards the servers are stopped and their datadirs deleted (my.cnf and the error log
    stay for post-mortems).
    """
    servers: list[EmbeddedMariaDB] = []
    callspec = getattr(request.node, "callspec", None)
    name = callspec.params.get("embedded", "mariadb-10.11") if callspec else "mariadb-10.11"

    def make(**kwargs: Any) -> EmbeddedMariaDB:
        kwargs.setdefault("basedir", tmp_path_factory.mktemp(name))
        server = _named(name, **kwargs)
        servers.append(server)
        return start_or_skip(server)

    try:
        yield make
    finally:
        for server in servers:
            server.cleanup()
            shutil.rmtree(server.datadir, ignore_errors=True)


_db_counter = itertools.count(1)


@pytest.fixture
def db(mariadb: EmbeddedMariaDB, request: pytest.FixtureRequest):
    """The name of a new empty database (``t_<test name>_<n>``), dropped after the test."""
    stem = re.sub(r"[^0-9a-zA-Z]+", "_", request.node.name).strip("_").lower()
    stem = re.sub(r"^test_", "", stem)[:40] or "db"
    name = f"t_{stem}_{next(_db_counter)}"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
    mariadb.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        if mariadb.is_running():
            _drop_database(mariadb, name)


def _drop_database(server, name: str) -> None:
    """``DROP DATABASE`` after a test. A lock wait timeout (error 1205: a transaction of the
    test still holds a lock there, e.g. an XA transaction prepared on a connection the server
    has not detached yet; seen once on MariaDB 11.8 under load after a passing test) becomes a
    warning: the database is left on the temporary server, the test's own checks stand."""
    import pymysql
    try:
        server.execute(f"DROP DATABASE IF EXISTS `{name}`")
    except pymysql.err.OperationalError as e:
        if e.args[0] != 1205:
            raise
        import warnings
        warnings.warn(f"database {name} left on {server!r}: {e}", stacklevel=2)


@pytest.fixture
def binlog_snapshot(mariadb: EmbeddedMariaDB, tmp_path: Path) -> Callable[..., list[Path]]:
    """``snap(server=None, since_file=None) -> list[Path]``: closed binlogs copied to tmp.

    Each call runs ``FLUSH BINARY LOGS`` (so every file written so far is closed), then
    copies the closed files (oldest first) into a new sub-directory of ``tmp_path``; the
    server keeps writing to its new file.  ``since_file`` (e.g. the file part of
    ``mariadb.current_position()`` taken before the test wrote anything) skips older files.
    """
    calls = itertools.count(1)

    def snap(server: EmbeddedMariaDB | None = None, since_file: str | None = None) -> list[Path]:
        return (server or mariadb).snapshot_binlogs(tmp_path / f"binlogs-{next(calls)}",
                                                    since_file=since_file)

    return snap


# --- Spark ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession, one per test module (start-up costs several seconds)."""
    pytest.importorskip("pyspark")
    from streaming.apps.local_spark import local_spark

    session = local_spark("binlog-cdc-tests")
    yield session
    session.stop()


# --- MySQL 8.4 in Docker (optional) ---------------------------------------------------------


def docker_available(timeout: float = 3.0) -> bool:
    """True when a Docker engine answers quickly; never raises, never hangs."""
    try:
        import docker  # the SDK, a testcontainers dependency

        client = docker.from_env(timeout=int(max(1, timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        pass
    try:
        r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        return r.returncode == 0 and bool(r.stdout.strip())
    except Exception:
        return False


@dataclass
class ExternalMySQL:
    """Connection facts of a MySQL server we did not start ourselves (the 8.4 container)."""

    host: str
    port: int
    root_password: str
    version: str = ""
    cdc_user: str = "cdc"
    cdc_password: str = "cdc-secret"

    def root_params(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": "root",
                "password": self.root_password}

    def cdc_params(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.cdc_user,
                "password": self.cdc_password}

    def connect(self, user: str = "root", database: str | None = None, **kw: Any):
        import pymysql

        params = self.root_params() if user == "root" else self.cdc_params()
        params.update(charset="utf8mb4", autocommit=True, max_allowed_packet=64 << 20)
        if database is not None:
            params["database"] = database
        params.update(kw)
        return pymysql.connect(**params)

    def execute(self, sql: str, params: Any = None, database: str | None = None) -> list[tuple]:
        conn = self.connect(database=database)
        try:
            return fetch_rows(conn, sql, params)
        finally:
            conn.close()


MYSQL84_ARGS = (
    "--server-id=1 --log-bin=mysql-bin --binlog-format=ROW --binlog-row-image=FULL "
    "--binlog-row-metadata=FULL --gtid-mode=ON --enforce-gtid-consistency=ON "
    "--max-allowed-packet=64M --character-set-server=utf8mb4"
)


@pytest.fixture(scope="session")
def mysql84():
    """A MySQL 8.4 server in a container (GTID on, ROW binlog, user cdc/cdc-secret)."""
    if not docker_available():
        pytest.skip("no Docker engine: MySQL 8.4 container tests skipped")
    try:
        from testcontainers.community.mysql import MySqlContainer  # testcontainers >= 4.11
    except ImportError:
        from testcontainers.mysql import MySqlContainer

    container = MySqlContainer("mysql:8.4", root_password="root-secret",
                               dbname="cdc_test").with_command(MYSQL84_ARGS)
    with container:
        server = ExternalMySQL(host=container.get_container_host_ip(),
                               port=int(container.get_exposed_port(3306)),
                               root_password="root-secret")
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                server.version = cur.fetchone()[0]
                cur.execute("CREATE USER IF NOT EXISTS 'cdc'@'%%' IDENTIFIED BY %s",
                            (server.cdc_password,))
                cur.execute("GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD, "
                            "PROCESS, SHOW DATABASES ON *.* TO 'cdc'@'%'")
        finally:
            conn.close()
        yield server


# --- row decoders: compiled and pure Python ---------------------------------------------------

ROW_DECODER_MODULES = frozenset({
    "test_types_live", "test_rowcompile", "test_seed_vectors", "test_mysql8_events",
    "test_parser_robustness", "test_type_oracle", "test_charsets_live",
})
"""Test modules whose every test runs once per row decoder (``[c]`` and ``[python]``)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = _servers_of(metafunc.definition)
    if "metadata_server" in metafunc.fixturenames:
        levels = ["FULL", "NO_LOG"]
        if names is not None and "mysql-9.7" in names:
            levels += ["mysql-FULL", "mysql-MINIMAL"]
        metafunc.parametrize("metadata_server", levels, indirect=True)
    elif names is not None and "embedded" in metafunc.fixturenames:
        metafunc.parametrize("embedded", selected_servers(names), indirect=True,
                             scope="session")
    elif names is not None and "mariadb_factory" in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid} is marked servers and uses "
                                f"mariadb_factory: take the fixture server (or mariadb, db) "
                                f"too, else its servers are all MariaDB 10.11")
    if metafunc.definition.path.stem in ROW_DECODER_MODULES:
        metafunc.parametrize("row_decoder", ["c", "python"], indirect=True)


@pytest.fixture(autouse=True)
def row_decoder(request: pytest.FixtureRequest):
    """The row decoder of this test (``"c"``/``"python"``), or None when not parametrized.

    It is made the process default for the test, so rows events of every parser the test (or
    a module fixture, when rows are decoded during the test) creates without ``row_decoder=``
    decode with it."""
    name = getattr(request, "param", None)
    if name is None:
        yield None
        return
    from cdc.rows import backend

    if name == "c" and not backend.c_decoder_available():
        msg = (f"the compiled row decoder cdc.rows._rowdecode is not built ({backend.C_MISSING}); "
               f"install with a C compiler and the Python headers to test it")
        if os.environ.get("CI"):
            pytest.fail(f"CI is set: {msg}", pytrace=False)
        pytest.skip(msg)
    previous = backend.active_decoder()
    backend.set_default_decoder(name)
    try:
        yield name
    finally:
        backend.set_default_decoder(previous)
