"""The batch reader of the flat layout (option ``layout=flat``): the typed envelope's reader,
its batches flattened by :func:`streaming.contract.flat.flatten_batches`."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from streaming.contract.flat import flatten_batches


class FlatBatchReader(DataSourceReader):
    """A batch reader of the typed envelope (*inner*) giving the flat layout."""

    def __init__(self, inner: DataSourceReader, columns):
        self.inner = inner
        self.columns = columns

    def partitions(self):
        return self.inner.partitions()

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        return flatten_batches(self.inner.read(partition), self.columns)
