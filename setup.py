"""Build configuration for the optional C row decoder only; pyproject.toml holds the metadata.

``cdc.rows._rowdecode`` is optional: without a C compiler (or Python headers) its build fails with a
warning, the install goes on, and binlog-cdc uses its pure-Python decoder (see cdc/rows/decode.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cdc.rows._rowdecode", sources=["cdc/rows/_rowdecode.c"],
                           optional=True)])
