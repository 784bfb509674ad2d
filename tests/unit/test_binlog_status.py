"""cdc.replica.sql.binlog_status: the one reader of the binlog end, in the server's own words."""

from __future__ import annotations

import pymysql
import pytest

from cdc.errors import ConfigurationError, PrivilegeError
from cdc.positions import Position
from cdc.replica.config import ReplicaConfig
from cdc.replica.server import parse_server_version
from cdc.replica.sql import binlog_status

CONFIG = ReplicaConfig("db1", 3306, "cdc", "x")


class _Server:
    """Answers SHOW ... STATUS like a server that knows only *spellings*."""

    def __init__(self, spellings, row, *, denied: str | None = None):
        self.spellings, self.row, self.asked, self.denied = set(spellings), row, [], denied

    def query(self, sql, args=None):
        self.asked.append(sql)
        if sql == "SELECT CURRENT_USER()":
            return [("cdc@10.%",)]
        if sql not in self.spellings:
            raise pymysql.err.ProgrammingError(1064, f"You have an error in your SQL syntax near "
                                                     f"'{sql}'")
        if self.denied:
            raise pymysql.err.OperationalError(1227, f"Access denied; you need (at least one of) "
                                                     f"the SUPER, {self.denied} privilege(s)")
        return [self.row] if self.row else []


def test_each_server_is_asked_in_its_own_words():
    srv = _Server({"SHOW BINARY LOG STATUS"},
                  ("binlog.000007", 1234, "", "", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42"))
    end = binlog_status(srv.query, parse_server_version("9.7.4"), CONFIG)
    assert (end.file, end.pos) == ("binlog.000007", 1234)
    assert str(end.gtid_set) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42"
    assert srv.asked == ["SHOW BINARY LOG STATUS"]
    srv = _Server({"SHOW MASTER STATUS"}, ("binlog.000002", 389, "", "", ""))
    assert binlog_status(srv.query, parse_server_version("8.0.36"), CONFIG).pos == 389
    assert srv.asked == ["SHOW MASTER STATUS"]


def test_mariadb_row_has_no_gtid_column():
    srv = _Server({"SHOW MASTER STATUS"}, ("mysql-bin.000002", 389, "", ""))
    end = binlog_status(srv.query, parse_server_version("5.5.5-10.11.6-MariaDB-log"), CONFIG)
    assert end == Position("mysql-bin.000002", 389) and end.gtid is None


def test_binary_log_off_and_a_missing_privilege_say_what_to_do():
    with pytest.raises(ConfigurationError, match=r"returned nothing.*log_bin"):
        binlog_status(_Server({"SHOW MASTER STATUS"}, None).query,
                      parse_server_version("10.11.6-MariaDB"), CONFIG)
    srv = _Server({"SHOW MASTER STATUS"}, None, denied="BINLOG MONITOR")
    with pytest.raises(PrivilegeError) as e:
        binlog_status(srv.query, parse_server_version("10.11.6-MariaDB"), CONFIG)
    assert str(e.value).startswith("user 'cdc' ('cdc'@'10.%') lacks BINLOG MONITOR on db1:3306")
    assert str(e.value).endswith("GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER "
                                 "ADMIN ON *.* TO 'cdc'@'10.%';")


def test_sql_session_retries_a_lost_connection_as_configured():
    from cdc.replica.sql import SqlSession
    made = []

    def connect():
        made.append(len(made))
        return made[-1]

    def call(conn):
        if conn == 0:          # the first connection is found dropped
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        return f"answered on connection {conn}"

    s = SqlSession(connect)                       # default: once more, on a new connection
    assert s.run(call) == "answered on connection 1" and made == [0, 1]
    made.clear()
    s = SqlSession(connect, retries=0)            # ServerStatus: raise; the next call reconnects
    with pytest.raises(pymysql.err.OperationalError):
        s.run(call)
    assert s.conn is None and made == [0]
    assert s.run(call) == "answered on connection 1" and made == [0, 1]
