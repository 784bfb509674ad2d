"""A small MERGE-capable Spark catalog for the tests (Java sources in ``src/``; see build.py)."""
