"""The initial snapshot (issue 14): table rows read with plain SELECTs, valued like the binlog."""
