"""streaming.source.worker_heap: a task worker's imports frozen (those of its first tasks too),
out of the full collections PySpark's daemon runs after each task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, sys, time
import streaming.source.stream_reader, streaming.source.snapshot
from streaming.source.worker_heap import settle
before = len(gc.get_objects())
settle()
assert "pandas" not in sys.modules, "settle imported pandas (a cold start's cost)"
frozen = gc.get_freeze_count()
settle()
assert gc.get_freeze_count() == frozen, "settled twice"
import xml.dom.minidom      # what a task imports after the first settle (the chunk reader...)
grown = len(gc.get_objects())
assert grown > 100
settle()                     # the next task's start: those imports out of sight too
assert gc.get_freeze_count() >= frozen + grown - 50, "a task's imports left to the collections"
assert len(gc.get_objects()) < 50
cycle = []
cycle.append(cycle)          # a task's garbage stays collectable
del cycle
assert gc.collect() >= 1
print(before, frozen)
"""


def test_settle_freezes_the_imports_and_later_ones_and_tasks_garbage_stays_collectable():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    before, frozen = map(int, p.stdout.split())
    assert frozen >= before > 10_000          # the imports, pyarrow's too


def test_few_collections_raises_the_young_threshold_for_the_block_only():
    import gc

    import pytest

    from streaming.source.worker_heap import BULK_YOUNG, few_collections
    old = gc.get_threshold()
    with few_collections():
        assert gc.get_threshold() == (max(BULK_YOUNG, old[0]),) + old[1:]
        cycle = []
        cycle.append(cycle)      # garbage made in the block is still collectable
        del cycle
        assert gc.collect() >= 1
    assert gc.get_threshold() == old
    with pytest.raises(KeyError), few_collections(5000):
        raise KeyError("x")
    assert gc.get_threshold() == old


_PLANNING = """
import gc, pickle, sys
import pyspark.sql.worker.create_data_source, pyspark.sql.worker.plan_data_source_read
from pyspark.sql.datasource import CaseInsensitiveDict
from streaming.source.datasource import BinlogCdcDataSource
opts = CaseInsensitiveDict({"host": "127.0.0.1", "port": "3306", "user": "u", "password": "p"})
source = BinlogCdcDataSource(options=opts)       # PySpark's create_data_source worker
schema = source.schema()
create = len(gc.get_objects())
blob = pickle.dumps(source)
del source
source = pickle.loads(blob)                      # PySpark's plan_data_source_read worker
reader = source.streamReader(schema)
print(create, len(gc.get_objects()), gc.get_freeze_count())
"""


def test_the_planning_workers_imports_are_out_of_pysparks_collection_after_each_call():
    # PySpark's daemon runs gc.collect() after each call of its planning workers (the source's
    # creation, the read's planning): 15-20 ms each per query when it walked their imports
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", _PLANNING], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    create, plan, frozen = map(int, p.stdout.split())
    assert frozen > 20_000                  # PySpark's, pyarrow's, ours
    assert create < 2_000 and plan < 2_000  # what the collections still walk
