"""tools.check_layout: the repository keeps its layers, and the checker catches what it should."""

from pathlib import Path

from tools import check_layout


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_repository_has_no_cycle_no_private_import_and_keeps_its_layers():
    assert check_layout.problems() == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _tree(tmp_path, {
        "cdc/__init__.py": "", "streaming/__init__.py": "",
        "cdc/a.py": "from cdc.b import x\n",
        "cdc/b.py": "x = 1\ndef f():\n    from cdc.c import y\n",
        "cdc/c.py": "import cdc.a\ny = 2\n",
    })
    assert check_layout.problems(root) == ["import cycle: cdc.a -> cdc.b -> cdc.c -> cdc.a"]


def test_private_names_layers_and_size_are_found(tmp_path):
    root = _tree(tmp_path, {
        "cdc/__init__.py": "", "streaming/__init__.py": "",
        "cdc/binlog/__init__.py": "", "cdc/replica/__init__.py": "", "cdc/rows/__init__.py": "",
        "cdc/binlog/parser.py": "from cdc.replica.client import C\nfrom cdc.rows.decode import _p\n",
        "cdc/replica/client.py": "import pyarrow\nfrom cdc.cli.main import main\nC = 1\n",
        "cdc/rows/decode.py": "from cdc.rows import _rowdecode\n_p = 1\n" + "x = 1\n" * 700,
        "streaming/source/datasource.py": "from cdc.rows.decode import _p\n",
    })
    found = check_layout.problems(root)
    assert sorted(found) == sorted([
        "cdc/binlog/parser.py:1: the sans-IO layer cdc.binlog.parser imports cdc.replica.client",
        "cdc/binlog/parser.py:2: imports the private name _p of cdc.rows.decode",
        "cdc/replica/client.py:1: cdc/ imports pyarrow (Spark/Arrow belong in streaming/ and the "
        "spark extra)",
        "cdc/replica/client.py:2: cdc.replica.client imports the CLI (cdc.cli.main)",
        "cdc/rows/decode.py: 702 lines (more than 650: split it by job)",
        "streaming/source/datasource.py:1: imports the private name _p of cdc.rows.decode",
    ])


def test_cdc_exports_its_public_api_without_loading_spark_or_arrow():
    import subprocess
    import sys
    code = ("import sys, cdc; names = cdc.__all__; objs = [getattr(cdc, n) for n in names]; "
            "assert all(o is not None for o in objs); "
            "print(len(names), 'pyspark' in sys.modules, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(check_layout.ROOT), check=True).stdout.split()
    assert out == [str(len(__import__("cdc").__all__)), "False", "False"]


def test_streaming_layers_are_kept(tmp_path):
    root = _tree(tmp_path, {
        "cdc/__init__.py": "", "streaming/__init__.py": "",
        "streaming/contract/__init__.py": "", "streaming/source/__init__.py": "",
        "streaming/sinks/__init__.py": "", "streaming/apps/__init__.py": "",
        "streaming/contract/envelope.py": "from streaming.source.options import O\n",
        "streaming/source/options.py": "from streaming.contract.envelope import E\nO = 1\n",
        "streaming/sinks/plan.py": "from streaming.source.options import O\n"
                                   "from streaming.contract.envelope import E\n",
        "streaming/source/datasource.py": "from streaming.apps.job import main\n",
        "streaming/apps/job.py": "from streaming.sinks.plan import P\n"
                                 "from streaming.source.options import O\nmain = 1\n",
    })
    found = check_layout.problems(root)
    assert sorted(p for p in found if not p.startswith("import cycle")) == sorted([
        "streaming/contract/envelope.py:1: streaming.contract.envelope (streaming.contract) "
        "imports streaming.source.options",
        "streaming/sinks/plan.py:1: streaming.sinks.plan (streaming.sinks) imports "
        "streaming.source.options",
        "streaming/source/datasource.py:1: streaming.source.datasource (streaming.source) imports "
        "streaming.apps.job",
    ])


def test_version_dependent_pyspark_apis_are_imported_by_the_compat_module_alone(tmp_path):
    root = _tree(tmp_path, {
        "cdc/__init__.py": "", "streaming/__init__.py": "",
        "streaming/_compat.py": "from pyspark.sql.streaming.datasource import ReadLimit\n"
                                "from pyspark import pipelines\n",
        "streaming/source.py": "from pyspark.sql.streaming.datasource import ReadLimit\n"
                               "from streaming._compat import ReadLimit as R\n",
        "streaming/flows.py": "def f():\n    from pyspark import pipelines as dp\n",
        "bench/floor.py": "from streaming._compat import from_arrow_schema\n"
                          "from pyspark.sql.pandas.types import from_arrow_type\n",
    })
    assert sorted(check_layout.problems(root)) == [
        "bench/floor.py:2: imports pyspark.sql.pandas.types, which not every supported PySpark "
        "has: take it from streaming._compat",
        "streaming/flows.py:2: imports pyspark.pipelines, which not every supported PySpark "
        "has: take it from streaming._compat",
        "streaming/source.py:1: imports pyspark.sql.streaming.datasource, which not every "
        "supported PySpark has: take it from streaming._compat",
    ]
