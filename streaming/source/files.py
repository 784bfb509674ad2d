"""Batch reads of archived binlog files: ``spark.read.format("binlog-cdc").load(paths)``, one
task per file, each decoding its file with the sans-IO parser (:mod:`cdc.binlog.files`)."""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cdc.binlog.files import BinlogFileReader, EarlierPrepared
from cdc.binlog.transactions import TransactionAssembler
from cdc.errors import ConfigurationError

from streaming.source.batches import BatchBuilder, record_batches
from streaming.source.options import SourceOptions
from streaming.source.spark_errors import user_errors
from streaming.source.storage import list_files, storage_for

__all__ = ["FilePartition", "columns_from_files", "FileBatchReader"]


class FilePartition(InputPartition):
    """One binlog file: an absolute local path, or a URL (``s3://...``)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


def columns_from_files(opts: SourceOptions, db: str, table: str):
    """The column definitions of *db.table* from the first TABLE_MAP for it in the files."""
    from cdc.binlog.events import TableMapEvent
    want = (db.lower(), table.lower())
    st = storage_for(opts.paths, opts.storage)
    for path in list_files(opts.paths, opts.storage):
        for ev in BinlogFileReader([path], storage=st, row_decoder=opts.row_decoder).events():
            if isinstance(ev, TableMapEvent):
                tmap = ev.table
                if (tmap.schema.lower(), tmap.table.lower()) == want:
                    if any(c.name is None for c in tmap.columns):
                        raise ConfigurationError(
                            f"option table: the binlog's TABLE_MAP of {db}.{table} has no column "
                            f"names (binlog_row_metadata=FULL is needed for typed batch reads)")
                    return tmap.columns
    raise ConfigurationError(f"option table: {db}.{table} has no row changes in the given files")


@user_errors
class FileBatchReader(DataSourceReader):
    """One task per binlog file; each decodes its file with the sans-IO parser."""

    def __init__(self, opts: SourceOptions, schema: StructType, columns):
        self.opts = opts
        self.schema = schema
        self.columns = columns

    def partitions(self):
        paths = list_files(self.opts.paths, self.opts.storage)
        if not paths:
            raise ConfigurationError(f"no binlog files at {', '.join(self.opts.paths)}")
        return [FilePartition(p) for p in paths]

    def read(self, partition: FilePartition) -> Iterator:
        builder = BatchBuilder(self.schema, self.columns)
        st = storage_for([partition.path], self.opts.storage)

        def earlier():      # an XA COMMIT of a transaction prepared in an earlier file
            paths = list_files(self.opts.paths, self.opts.storage)
            return paths[:paths.index(partition.path)] if partition.path in paths else []
        asm = TransactionAssembler(self.opts.table_filter(), missing_prepared=EarlierPrepared(
            earlier, self.opts.table_filter(), storage=st, row_decoder=self.opts.row_decoder))

        def transactions():
            for ev in BinlogFileReader([partition.path], storage=st,
                                       row_decoder=self.opts.row_decoder).events():
                tx = asm.push(ev)
                if tx is not None:
                    yield tx
        return record_batches(transactions(), builder)
