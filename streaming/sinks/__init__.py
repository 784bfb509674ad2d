"""What applies the source's changes to tables: :mod:`.plan` (the upsert plan every sink shares:
the last change per key by ``seq``, primary-key changes, truncates), :mod:`.json_images` (JSON
row images to Arrow), :mod:`.foreach_batch` (errors raised inside ``foreachBatch``), and
:mod:`.delta` (the delta-rs upserter). A sink never imports the source."""
