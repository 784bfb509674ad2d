"""What applies the source's changes to tables: :mod:`.plan` (the upsert plan every sink shares:
the last change per key by ``seq``, primary-key changes, truncates, the lineage of schema
changes, the MERGE's clauses), :mod:`.tables` (source table definitions, target paths),
:mod:`.json_images` (JSON row images to Arrow), :mod:`.foreach_batch` (errors raised inside
``foreachBatch``), :mod:`.delta` (the delta-rs upserter, no JVM) and :mod:`.spark` (Spark's MERGE
into Delta or Iceberg tables). A sink never imports the source."""
