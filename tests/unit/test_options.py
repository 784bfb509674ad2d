"""streaming.source.options: the Spark source's options, parsed and checked once, and the one
ReplicaConfig they become (no Spark, no server)."""

import pickle

import pytest

from cdc.errors import ConfigurationError
from cdc.positions import Start
from cdc.replica.config import ReplicaConfig, SslOptions
from streaming.contract.envelope import ENVELOPE_FIELDS
from streaming.source.options import OPTIONS, SourceOptions

BASE = {"host": "db1", "user": "cdc", "password": "s3cret"}


def parse(**kw):
    return SourceOptions.parse({**BASE, **kw}, streaming=True)


def test_names_are_case_insensitive_and_typed():
    o = SourceOptions.parse({**BASE, "PORT": "3307", "maxeventspertrigger": "500",
                             "MinPartitions": "2", "heartbeatIntervalMs": "2500",
                             "failOnDataLoss": "False", "serverId": "77"})
    assert (o.port, o.max_events, o.min_partitions, o.heartbeat_s) == (3307, 500, 2, 2.5)
    assert o.fail_on_data_loss is False and o.server_id == 77


def test_idle_advance_defaults_and_zero():
    o = parse()
    assert (o.idle_advance_s, o.idle_advance_bytes) == (60.0, 16 << 20)
    o = parse(idleAdvanceIntervalMs="0", IDLEADVANCEBYTES="1048576")
    assert (o.idle_advance_s, o.idle_advance_bytes) == (0.0, 1 << 20)


def test_an_unknown_option_lists_the_valid_ones():
    with pytest.raises(ConfigurationError) as e:
        parse(maxEventsPerTriger="5")
    assert "unknown option 'maxEventsPerTriger' for the binlog-cdc source (did you mean " \
           "maxEventsPerTrigger?)" in str(e.value)
    assert all(name in str(e.value) for name in OPTIONS)


def test_an_option_typo_names_the_closest_option():
    with pytest.raises(ConfigurationError, match=r"'hots' .*\(did you mean host\?\)"):
        parse(hots="127.0.0.1")
    with pytest.raises(ConfigurationError) as e:
        parse(zzzzzz="1")
    assert "did you mean" not in str(e.value)


@pytest.mark.parametrize("kw, message", [
    ({"port": "0"}, "option port must be from 1 to 65535, not 0"),
    ({"port": "x"}, "option port must be an integer, not 'x'"),
    ({"idleAdvanceBytes": "-1"}, "option idleAdvanceBytes must be >= 0, not -1"),
    ({"failOnDataLoss": "maybe"}, "option failOnDataLoss must be true or false, not 'maybe'"),
    ({"table": "orders"}, "option table must name one table as db.table, not 'orders'"),
    ({"table": "shop.orders", "includeTables": "shop.*"},
     "options table and includeTables exclude each other"),
    ({"fields": "op,after,keys"}, "option fields: keys is not an envelope column; choose "
                                  "among op,db,table,before,after,key,ts_ms,source,seq"),
    ({"fields": " , "}, "option fields: names no column; choose among op,db,"),
    ({"fields": "after", "table": "a.b", "layout": "flat"}, "option fields needs layout=envelope"),
    ({"startingPosition": '{"file": "x.000001", "pos": 2}'},
     "startingPosition '{\"file\": \"x.000001\", \"pos\": 2}' is not understood"),
])
def test_bad_values_say_which_option_and_what_it_takes(kw, message):
    with pytest.raises(ConfigurationError) as e:
        parse(**kw)
    assert message in str(e.value)


def test_fields_keep_the_envelope_order_and_always_op():
    from streaming.contract.spark_schema import JSON_SCHEMA
    assert tuple(JSON_SCHEMA.fieldNames()) == ENVELOPE_FIELDS
    assert parse(fields="seq, after,before").fields == ("op", "before", "after", "seq")
    assert parse().fields is None


def test_a_stream_needs_host_and_user():
    with pytest.raises(ConfigurationError, match="needs option host"):
        SourceOptions.parse({"user": "cdc"}, streaming=True)
    with pytest.raises(ConfigurationError, match="needs option user"):
        SourceOptions.parse({"host": "db1"}, streaming=True)
    assert SourceOptions.parse({"path": "/x"}).paths == ("/x",)   # a batch read of files


def test_starting_positions():
    assert parse().starting == Start.latest()
    assert parse(startingPosition="earliest").starting == Start.earliest()
    assert parse(startingPosition='{"file": "mysql-bin.000042", "pos": 4}').starting == \
        Start.at("mysql-bin.000042", 4)
    assert parse(startingPosition='{"gtid": "0-1-42"}').starting == Start.mariadb_gtid("0-1-42")


def test_password_sources_and_secrecy(tmp_path, monkeypatch):
    f = tmp_path / "pw"
    f.write_text("from-file\nsecond line\n")
    o = SourceOptions.parse({"host": "db1", "user": "cdc", "passwordFile": str(f)})
    assert o.password.get() == "from-file"
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", "from-env")
    assert SourceOptions.parse({"host": "db1", "user": "cdc"}).password.get() == "from-env"
    o = parse()
    assert "s3cret" not in repr(o) and "s3cret" not in str(o.password) \
        and "s3cret" not in f"{o.password}"
    assert pickle.loads(pickle.dumps(o)).password.get() == "s3cret"
    with pytest.raises(ConfigurationError, match=r"cannot read passwordFile .*nope"):
        SourceOptions.parse({"host": "db1", "user": "cdc", "passwordFile": str(tmp_path / "nope")})


def test_server_id_default_is_random_and_leaves_room_for_the_tasks():
    ids = {parse().server_id for _ in range(20)}
    assert len(ids) > 1 and all(1 << 30 <= i <= (1 << 32) - 1 - 2048 for i in ids)
    with pytest.raises(ConfigurationError, match="serverId"):
        parse(serverId=str((1 << 32) - 1000))


def test_one_replica_config_from_the_options():
    o = parse(port="3310", serverId="4242", sslCa="/ca.pem", sslVerify="true",
              connectTimeoutMs="2500", heartbeatIntervalMs="3000", includeTables="shop.*",
              excludeTables="shop.tmp_*")
    c = o.replica_config()
    assert isinstance(c, ReplicaConfig)
    assert (c.host, c.port, c.user, c.password.get(), c.server_id) == \
        ("db1", 3310, "cdc", "s3cret", 4242)
    assert c.ssl == SslOptions(ca="/ca.pem", verify=True)
    assert (c.connect_timeout, c.heartbeat_interval, c.read_timeout) == (2.5, 3.0, 11.0)
    assert c.table_filter("shop.orders") and not c.table_filter("shop.tmp_x") \
        and not c.table_filter("other.t")
    assert not c.check_server_id                       # Spark's tasks share the id range
    assert o.replica_config(server_id=4243).server_id == 4243
    assert "s3cret" not in repr(c)


def test_on_data_loss_and_its_older_spelling_failondataloss():
    assert parse().on_data_loss == "fail" and parse().fail_on_data_loss
    assert parse(onDataLoss="Resnapshot").on_data_loss == "resnapshot"
    assert parse(onDataLoss="resnapshot").fail_on_data_loss     # where no re-snapshot can start
    assert parse(failOnDataLoss="false").on_data_loss == "skip"
    assert parse(failOnDataLoss="true", onDataLoss="fail").on_data_loss == "fail"
    with pytest.raises(ConfigurationError, match="onDataLoss must be fail, skip or resnapshot"):
        parse(onDataLoss="retry")
    with pytest.raises(ConfigurationError, match="onDataLoss=resnapshot and failOnDataLoss=false "
                                                 "disagree: keep onDataLoss only"):
        parse(onDataLoss="resnapshot", failOnDataLoss="false")


def test_snapshot_batch_rows():
    assert parse().snapshot_batch_rows() == 500_000
    assert parse(snapshotRowsPerTrigger="1000").snapshot_batch_rows() == 1000
    assert parse(maxEventsPerTrigger="300").snapshot_batch_rows() == 300
    assert parse(snapshotRowsPerTrigger="200", maxEventsPerTrigger="300").snapshot_batch_rows() \
        == 200
    assert parse().snapshot_batch_rows(40) == 40
