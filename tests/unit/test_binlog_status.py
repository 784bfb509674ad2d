"""cdc.replica.sql.binlog_status: the one reader of the binlog end (Spark driver, lag monitor)."""

from __future__ import annotations

import pymysql
import pytest

from cdc.errors import ConfigurationError
from cdc.positions import Position
from cdc.replica.sql import binlog_status


class _Server:
    """Answers SHOW ... STATUS like a server that knows only *spellings*."""

    def __init__(self, spellings, row):
        self.spellings, self.row, self.asked = set(spellings), row, []

    def query(self, sql):
        self.asked.append(sql)
        if sql not in self.spellings:
            raise pymysql.err.ProgrammingError(1064, f"You have an error in your SQL syntax near "
                                                     f"'{sql}'")
        return [self.row] if self.row else []


def test_mysql_84_spelling_after_the_removed_one():
    srv = _Server({"SHOW BINARY LOG STATUS"},
                  ("binlog.000007", 1234, "", "", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42"))
    st = binlog_status(srv.query)
    assert (st.end.file, st.end.pos) == ("binlog.000007", 1234)
    assert str(st.end.gtid_set) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42"
    assert st.statement == "SHOW BINARY LOG STATUS"
    assert srv.asked == ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"]
    # asked again with the spelling that worked: one statement, no failing one first
    srv.asked.clear()
    assert binlog_status(srv.query, first=st.statement).end.pos == 1234
    assert srv.asked == ["SHOW BINARY LOG STATUS"]


def test_mariadb_row_has_no_gtid_column():
    st = binlog_status(_Server({"SHOW MASTER STATUS"}, ("mysql-bin.000002", 389, "", "")).query)
    assert st == (Position("mysql-bin.000002", 389), "SHOW MASTER STATUS")
    assert st.end.gtid is None


def test_binary_log_off_and_unknown_server_say_what_to_do():
    with pytest.raises(ConfigurationError, match=r"returned nothing.*log_bin"):
        binlog_status(_Server({"SHOW MASTER STATUS"}, None).query, where="db1:3306")
    with pytest.raises(ConfigurationError, match="cannot read the binlog position of db1"):
        binlog_status(_Server(set(), None).query, where="db1")


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
