"""One AutoCDC flow per table of a MySQL/MariaDB server (see streaming.apps.pipelines).

Settings come from the environment (the password: BINLOG_CDC_PASSWORD, read by the source
itself, or BINLOG_CDC_PASSWORD_FILE):

  BINLOG_CDC_HOST (127.0.0.1)  BINLOG_CDC_PORT (3306)  BINLOG_CDC_USER (cdc)
  BINLOG_CDC_TABLES (shop.*)   BINLOG_CDC_SCD_TYPE (1) BINLOG_CDC_START (snapshot)
  BINLOG_CDC_SERVER_ID (4242)  BINLOG_CDC_TARGET_FORMAT (the session's default table format)
"""

import os

from streaming.apps.pipelines import auto_cdc_flows

env = os.environ.get
extra = {"passwordFile": env("BINLOG_CDC_PASSWORD_FILE")} if env("BINLOG_CDC_PASSWORD_FILE") \
    else {}

auto_cdc_flows(
    spark,  # noqa: F821 (the pipeline's session, set by spark-pipelines)
    tables=env("BINLOG_CDC_TABLES", "shop.*"),
    scd_type=int(env("BINLOG_CDC_SCD_TYPE", "1")),
    host=env("BINLOG_CDC_HOST", "127.0.0.1"),
    port=env("BINLOG_CDC_PORT", "3306"),
    user=env("BINLOG_CDC_USER", "cdc"),
    startingPosition=env("BINLOG_CDC_START", "snapshot"),
    serverId=env("BINLOG_CDC_SERVER_ID", "4242"),
    target_format=env("BINLOG_CDC_TARGET_FORMAT"),
    **extra,
)
