"""cdc.replica.binlog_events.QueryEventPages (SHOW BINLOG EVENTS read raw, only QUERY events'
rows decoded) gives what PyMySQL's rows of the same statement give, and
cdc.replica.binlog_ddl.ddl_statements finds the same statements with it as without, on real
servers: DDL with and without a default database, non-ASCII text, row events, two files, pages
that end anywhere."""

from __future__ import annotations

import pytest

from cdc.replica import binlog_ddl
from cdc.replica.binlog_events import QueryEventPages
from cdc.replica.config import ReplicaConfig
from cdc.replica.sql import connect, fetch_rows

pytestmark = pytest.mark.servers("mysql-9.7", "mariadb-11.8", "mariadb-10.11")


def _stretch(server, db):
    """Binlog from a start to an end holding DDL and DML over two files: (start, end)."""
    start = server.current_position()
    server.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(20))")
    for i in range(30):
        server.execute(f"INSERT INTO {db}.a VALUES ({i}, 'r{i}')")
    conn = server.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE a ADD COLUMN w VARCHAR(10) DEFAULT 'Query' COMMENT 'é ✓ Query'")
        cur.execute("UPDATE a SET v = 'Query' WHERE id < 5")
    conn.close()
    server.flush_binary_logs()
    for i in range(30, 45):
        server.execute(f"INSERT INTO {db}.a (id, v) VALUES ({i}, 'x')")
    server.execute(f"CREATE TABLE {db}.b (k INT PRIMARY KEY)")
    server.execute(f"DROP TABLE {db}.b")
    return start, server.current_position()


def test_pages_give_what_pymysql_gives(server, db):
    start, end = _stretch(server, db)
    p = server.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"])
    conn = connect(config)
    pages = QueryEventPages(config)
    try:
        for file in sorted({start[0], end[0]}):
            for pos, skip, limit in ((start[1] if file == start[0] else 4, 0, 1000), (4, 0, 7),
                                     (4, 1, 1), (4, 3, 5)):
                rows = fetch_rows(conn, f"SHOW BINLOG EVENTS IN %s FROM {pos} "
                                        f"LIMIT {skip}, {limit}", (file,))
                page = pages(file, pos, skip, limit)
                assert page.queries == [r for r in rows if r[2] == "Query"]
                assert page.count == len(rows)
                assert page.last == rows[-1]
                assert any("é ✓ Query" in r[5] for r in page.queries) or file != start[0] \
                    or limit != 1000
    finally:
        pages.close()
        conn.close()


@pytest.mark.parametrize("page", [3, 7, 1000])
def test_ddl_statements_same_with_pages(server, db, monkeypatch, page):
    start, end = _stretch(server, db)
    p = server.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"])
    conn = connect(config)
    try:
        def query(sql, args=None):
            return fetch_rows(conn, sql, args)
        monkeypatch.setattr(binlog_ddl, "PAGE", page)
        slow = binlog_ddl.ddl_statements(query, start, end)
        fast = binlog_ddl.ddl_statements(query, start, end, lambda: QueryEventPages(config))
        assert fast == slow
        texts = [s.sql for s in slow]
        assert len(texts) == 4 and "é ✓ Query" in texts[1], texts
        assert slow[1].schema == db and slow[1].file == start[0] and slow[2].file == end[0]
        # a stretch that ends inside the first file, right after the ALTER
        mid = (start[0], slow[1].end_pos)
        assert binlog_ddl.ddl_statements(query, start, mid, lambda: QueryEventPages(config)) \
            == binlog_ddl.ddl_statements(query, start, mid) == slow[:2]
    finally:
        conn.close()


@pytest.mark.parametrize("recv_size", [1, 61, 4096])
def test_pages_whose_rows_straddle_receives(server, db, recv_size):
    """Rows arriving in pieces (a receive ends inside a header or a row; many rows per
    receive): the page is still what PyMySQL gives."""
    start, end = _stretch(server, db)
    p = server.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"])
    conn = connect(config)
    pages = QueryEventPages(config)
    pages._reader.recv_size = recv_size
    try:
        rows = fetch_rows(conn, f"SHOW BINLOG EVENTS IN %s FROM {start[1]} LIMIT 0, 1000",
                          (start[0],))
        for _ in range(2):      # twice on the connection: the sequence numbers stay right
            page = pages(start[0], start[1], 0, 1000)
            assert page.queries == [r for r in rows if r[2] == "Query"]
            assert page.count == len(rows) > 60
            assert page.last == rows[-1]
    finally:
        pages.close()
        conn.close()
