"""bench e2e's peak-RSS table counts as "Python workers" only processes that run Python: the
JVM's command line (and that of the child it forks, with the JVM's memory, to start each
worker) names ``.../python3.x/site-packages/pyspark/...`` too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench.e2e import _children, python_descendants

#: the JVM's command line as PySpark starts it (argv[0] java, its classpath under site-packages)
JVM_LIKE = ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp "
            "/usr/lib/python3.11/site-packages/pyspark/conf:/usr/lib/python3.11/site-packages/"
            "pyspark/jars/slf4j-api-2.0.17.jar org.apache.spark.deploy.SparkSubmit pyspark-shell")


def test_only_python_programs_count_as_python_workers():
    # a stand-in for the JVM: not Python, "python" in its command line; below it a real
    # Python process (a worker) and another non-Python one with the JVM's command line
    parent = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "import time; time.sleep(30)" & '
                     f'sh -c "sleep 30; :" "{JVM_LIKE}" & wait', JVM_LIKE])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = _children()
            below = kids.get(parent.pid, [])
            if len(below) == 2 and all(open(f"/proc/{p}/cmdline", "rb").read() for p in below):
                break
            time.sleep(0.05)
        assert len(below) == 2
        assert "python" in open(f"/proc/{parent.pid}/cmdline").read()
        workers = python_descendants([parent.pid], kids)
        assert len(workers) == 1
        assert open(f"/proc/{workers[0]}/cmdline", "rb").read().split(b"\0")[0] == \
            sys.executable.encode()
    finally:
        kids, todo = _children(), [parent.pid]
        while todo:
            for p in kids.get(todo.pop(), []):
                todo.append(p)
                os.kill(p, signal.SIGKILL)
        parent.kill()
        parent.wait()
