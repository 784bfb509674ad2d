"""The initial snapshot (issue 14): table rows read with plain SELECTs, valued like the binlog."""

#: Rows of one micro-batch of a stream's snapshot at most (the stream's snapshotRowsPerTrigger
#: default): the binlog is read along in each batch, so it must be kept for one batch's time.
#: (Here, not in :mod:`cdc.snapshot.plan`: the Spark source's options name it in every Python
#: worker, and the plan's imports cost each of them ~10 ms.)
SNAPSHOT_BATCH_ROWS = 500_000
