"""What the ``binlog-cdc`` source emits and every sink consumes: :mod:`.envelope` (column names,
``seq``; no Spark), :mod:`.spark_schema` (the envelope's Spark types, typed mode's column types),
:mod:`.flat` (the flat layout), :mod:`.tables` (table definitions from ``information_schema``).
It imports neither the source nor a sink."""
