"""The fault-injection suite (issue 13): ``python3 -m pytest -m fault -s`` runs it alone and shows
each test's figures line. Every test carries ``@pytest.mark.fault(timeout=seconds)``: the
autouse fixture below fails it (SIGALRM in the main thread) when it runs longer, so a hung fault
cannot hang the suite; the tests' own waits have shorter deadlines still."""

from __future__ import annotations

import signal
import threading

import pytest


class FaultTestTimeout(Exception):
    """A fault test ran past the time bound of its ``fault`` marker."""


@pytest.fixture(autouse=True)
def fault_time_bound(request: pytest.FixtureRequest):
    marker = request.node.get_closest_marker("fault")
    limit = marker.kwargs.get("timeout") if marker is not None else None
    if not limit or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise FaultTestTimeout(f"{request.node.nodeid} ran past its bound of {limit} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(limit))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
