"""conf/ is what we tell users to run with: the private server started with conf/mariadb.cnf's
settings reports exactly them, and conf/grants-mariadb.sql gives an account that can stream."""

import configparser
from pathlib import Path

import pymysql
import pytest


ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.server


def _settings(name, section):
    cp = configparser.ConfigParser(allow_no_value=True, inline_comment_prefixes=("#",))
    cp.read(ROOT / "conf" / name)
    return dict(cp[section])


def test_mysql_conf_has_the_required_settings():
    s = _settings("mysql-8.4.cnf", "mysqld")
    assert s["binlog_format"] == "ROW" and s["binlog_row_image"] == "FULL"
    assert s["binlog_row_metadata"] == "FULL" and s["gtid_mode"] == "ON"


def test_mariadb_conf_applied_to_a_real_server(mariadb_factory):
    opts = {k: v for k, v in _settings("mariadb.cnf", "mariadb").items()
            if k not in ("log_bin", "server_id")}
    server = mariadb_factory(extra_options=opts)
    rows = dict(server.execute(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_format', 'binlog_row_image', "
        "'binlog_row_metadata', 'binlog_checksum', 'expire_logs_days')"))
    assert rows["binlog_format"] == "ROW" and rows["binlog_row_image"] == "FULL"
    assert rows["binlog_row_metadata"] == "FULL" and rows["binlog_checksum"] == "CRC32"
    assert float(rows["expire_logs_days"]) == 7
    sql = "\n".join(l for l in (ROOT / "conf" / "grants-mariadb.sql").read_text().splitlines()
                    if not l.strip().startswith("--"))
    sql = sql.replace("'cdc'@", "'cdc_conf'@")  # the harness already has a 'cdc' user
    for stmt in [s.strip() for s in sql.split(";") if s.strip()]:
        server.execute(stmt)
    conn = pymysql.connect(host=server.host, port=server.port, user="cdc_conf", password="change-me")
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        assert cur.fetchall()
    conn.close()
