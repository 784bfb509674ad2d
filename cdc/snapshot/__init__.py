"""The initial snapshot (issue 14): table rows read with plain SELECTs, as the binlog decoder gives them."""
