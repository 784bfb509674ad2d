"""cdc.positions: the one position type (order, distance, Spark offset form), the one start
parser and the one purged-binlog error."""

import json

import pytest

from cdc.binlog.gtid import GtidSet, MariaGtidPosition
from cdc.errors import BinlogPurgedError, ConfigurationError
from cdc.positions import Position, Start, binlog_file_number, parse_gtid_state, purged_error

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def P(file, pos, gtid=None):
    return Position(file, pos, gtid)


def test_bytes_behind():
    logs = [("mysql-bin.000007", 1000), ("mysql-bin.000008", 500), ("mysql-bin.000009", 700),
            ("mysql-bin.000010", 300)]
    assert P("mysql-bin.000009", 100).bytes_behind(P("mysql-bin.000009", 700), logs) == 600
    assert P("mysql-bin.000009", 700).bytes_behind(P("mysql-bin.000009", 700), logs) == 0
    assert P("mysql-bin.000009", 900).bytes_behind(P("mysql-bin.000009", 700), logs) == 0
    # rest of 000007 (1000-400) + all of 000008 + 000009 + 250 bytes of 000010
    assert P("mysql-bin.000007", 400).bytes_behind(P("mysql-bin.000010", 250), logs) == \
        600 + 500 + 700 + 250
    # a file number growing a digit (.999999 -> .1000000) still orders by number
    assert P("b.999999", 10).bytes_behind(P("b.1000000", 4),
                                          [("b.999999", 20), ("b.1000000", 4)]) == 14


def test_positions_order_by_file_number_then_byte_position():
    a, b, c, d = P("b.999999", 900), P("b.1000000", 4), P("b.1000000", 120), P("b.1000001", 4)
    assert sorted([d, c, b, a]) == [a, b, c, d]
    assert a < b < c < d and d > c >= c and not (c < c)
    assert max([b, d, a]) is d
    # the GTID state does not take part in the order, but in equality
    g = P("b.1000000", 4, GtidSet.parse(f"{UUID}:1-3"))
    assert not (g < b) and not (b < g) and g != b and g.same_place(b)
    with pytest.raises(ConfigurationError, match="no file"):
        P(None, None) < a


def test_binlog_file_number():
    assert binlog_file_number("mysql-bin.000042") == 42
    assert binlog_file_number("x.1000000") == 1_000_000
    assert binlog_file_number("nonumber", -1) == -1
    with pytest.raises(ConfigurationError, match="not a binlog file name"):
        binlog_file_number("nonumber")


@pytest.mark.parametrize("gtid, mariadb", [
    (None, None), (f"{UUID}:1-42:50", False), ("0-1-42,1-2-7", True), ("", True), ("", False)])
def test_offset_round_trip_keeps_json_text_and_key_order(gtid, mariadb):
    p = Position("mysql-bin.000003", 12345, parse_gtid_state(gtid, mariadb))
    d = p.to_offset()
    assert list(d) == (["file", "pos"] if gtid is None else ["file", "pos", "gtid"])
    text = json.dumps(d)
    back = Position.from_offset(json.loads(text), mariadb=mariadb)
    assert back == p and json.dumps(back.to_offset()) == text
    if gtid is not None:
        assert type(back.gtid) is (MariaGtidPosition if mariadb else GtidSet)


def test_offset_gtid_flavour_from_its_form_and_the_empty_text_from_the_server():
    assert isinstance(Position.from_offset({"file": "f.1", "pos": 4, "gtid": "0-1-2"}).gtid,
                      MariaGtidPosition)
    assert isinstance(Position.from_offset({"file": "f.1", "pos": 4, "gtid": f"{UUID}:1"}).gtid,
                      GtidSet)
    assert isinstance(Position.from_offset({"file": "f.1", "pos": 4, "gtid": ""},
                                           mariadb=True).gtid, MariaGtidPosition)
    with pytest.raises(ConfigurationError, match="not a binlog-cdc offset"):
        Position.from_offset({"file": "f.1"})


def test_after_advances_the_gtid_state_of_either_flavour():
    m = P("f.000001", 4, MariaGtidPosition.parse("0-1-5"))
    assert str(m.after("f.000001", 300, "0-1-6").gtid) == "0-1-6"
    s = P("f.000001", 4, GtidSet.parse(f"{UUID}:1-5"))
    nxt = s.after("f.000001", 300, f"{UUID}:6")
    assert str(nxt.gtid) == f"{UUID}:1-6" and nxt.last_gtid == f"{UUID}:6"
    assert P("f.000001", 4).after("f.000001", 9, None) == P("f.000001", 9)
    assert s.moved_to("f.000002", 4) == P("f.000002", 4, s.gtid)


@pytest.mark.parametrize("text, kind, file, pos, gtid", [
    ("earliest", "earliest", None, 4, None),
    ("  Latest ", "latest", None, 4, None),
    (None, "latest", None, 4, None),
    ("mysql-bin.000003:1234", "file", "mysql-bin.000003", 1234, None),
    ('{"file": "mysql-bin.000042", "pos": 4}', "file", "mysql-bin.000042", 4, None),
    ('{"file": "mysql-bin.000042", "pos": 99, "gtid": "0-1-2"}', "file", "mysql-bin.000042", 99,
     None),
    ('{"gtid": "0-1-42"}', "mariadb_gtid", None, 4, "0-1-42"),
    (f'{{"gtid": "{UUID}:1-42"}}', "gtid", None, 4, f"{UUID}:1-42"),
    ("1-2-7, 0-1-42", "mariadb_gtid", None, 4, "0-1-42,1-2-7"),
])
def test_every_start_spelling(text, kind, file, pos, gtid):
    s = Start.parse(text)
    assert (s.kind, s.file, s.pos, s.gtid) == (kind, file, pos, gtid)


@pytest.mark.parametrize("text", ["no such thing", '{"file": "f.000001", "pos": 3}',
                                  '{"file": "f.000001"}', '{"gtid": 5}', "{not json",
                                  '{"file": "f.1", "pos": true}'])
def test_bad_starts_name_the_option_and_the_spellings(text):
    with pytest.raises(ConfigurationError) as e:
        Start.parse(text, option="startingPosition")
    msg = str(e.value)
    assert msg.startswith(f"startingPosition {text!r} is not understood")
    assert "earliest" in msg and '"gtid"' in msg and "'file:pos'" in msg


def test_start_position_round_trip():
    assert Start.parse("earliest").position() is None
    assert Start.at("f.000002", 77).position() == P("f.000002", 77)
    assert Start.parse(P("f.000002", 77)) == Start.at("f.000002", 77)
    g = Start.parse(f"{UUID}:1-3").position()
    assert g.file is None and g.gtid == GtidSet.parse(f"{UUID}:1-3")
    assert g.to_start() == Start.gtid_set(f"{UUID}:1-3")


def test_purged_error_names_file_what_is_there_and_the_fix():
    e = purged_error("mysql-bin.000001", [("mysql-bin.000003", 10), ("mysql-bin.000005", 4)],
                     "db1:3306", context="stream offset mysql-bin.000001:4",
                     fix="Set failOnDataLoss=false to skip it.")
    assert isinstance(e, BinlogPurgedError)
    assert str(e) == ("binlog file mysql-bin.000001 (stream offset mysql-bin.000001:4) is no "
                      "longer on db1:3306 (it has mysql-bin.000003 .. mysql-bin.000005): it was "
                      "purged, or never existed, so the changes in it are lost to this stream. "
                      "Set failOnDataLoss=false to skip it.")
    assert "(it has no binlog files)" in str(purged_error("f.1", [], "h", fix="x"))


def test_positions_hold_prepared_xa_transactions():
    from cdc.binlog.xa import COMMIT, PREPARE, ROLLBACK, Prepared, XaStep
    x = Prepared("X'78',X'',1", "mysql-bin.000002", 300, 420)
    y = Prepared("X'79',X'',1", "mysql-bin.000002", 500, 620)
    p = Position("mysql-bin.000002", 200, GtidSet.parse(f"{UUID}:1-5"))
    p = p.after("mysql-bin.000002", 420, f"{UUID}:6", XaStep(PREPARE, x.xid, x))
    p = p.after("mysql-bin.000002", 620, f"{UUID}:7", XaStep(PREPARE, y.xid, y))
    assert p.prepared == (x, y) and str(p.gtid) == f"{UUID}:1-7"
    offset = p.to_offset()
    assert list(offset) == ["file", "pos", "gtid", "xa"]
    assert offset["xa"] == [[x.xid, x.file, 300, 420], [y.xid, y.file, 500, 620]]
    assert Position.from_offset(json.dumps(offset)) == p
    assert p.cli_args() == f"--gtid '{UUID}:1-7' --xa mysql-bin.000002:300,mysql-bin.000002:500"
    assert "holding prepared XA at mysql-bin.000002:300, mysql-bin.000002:500" in str(p)
    assert p.to_start().prepared == p.to_start().position().prepared == (x, y)
    q = p.after("mysql-bin.000003", 100, f"{UUID}:8", XaStep(COMMIT, x.xid))
    q = q.after("mysql-bin.000003", 200, f"{UUID}:9", XaStep(ROLLBACK, y.xid))
    assert q.prepared == () and "xa" not in q.to_offset()
    assert q.cli_args() == f"--gtid '{UUID}:1-9'"
    assert Start.at("f.000001", 4).holding([Prepared.parse("f.000001:120")]).prepared == \
        (Prepared(None, "f.000001", 120),)
    with pytest.raises(ConfigurationError, match="need a start at a position"):
        Start.latest().holding([Prepared.parse("f.000001:120")])
    with pytest.raises(ConfigurationError, match="expected FILE:POS"):
        Prepared.parse("f.000001")
    with pytest.raises(ConfigurationError, match="not a binlog-cdc offset"):
        Position.from_offset({"file": "f.000001", "pos": 4, "xa": [["x", "f.000001"]]})


@pytest.mark.parametrize("query, step", [
    ("XA COMMIT X'7831',X'',1", ("commit", "X'7831',X'',1")),
    ("XA ROLLBACK X'4142',X'63',7", ("rollback", "X'4142',X'63',7")),
    ("XA COMMIT 'x1'", ("commit", "X'7831',X'',1")),
    ("xa rollback 'a','b',3", ("rollback", "X'61',X'62',3")),
    ("XA COMMIT X'7833',X'',1 ONE PHASE", None),
    ("XA END X'7831',X'',1", None), ("XA START X'7831',X'',1", None), ("COMMIT", None),
])
def test_xa_decisions_are_read_from_the_statement(query, step):
    from cdc.binlog.xa import decision
    got = decision(query)
    assert (got and (got.action, got.xid)) == step or (got is None and step is None)
