"""The failure of a ``foreachBatch`` function, in a form Spark can handle.

Spark gets the exception of a Python ``foreachBatch`` function as text: Py4J sends the whole
traceback, every chained exception included, and the error of a Spark call made in the function
(a ``Py4JJavaError``) quotes the Java stack trace of each of its causes, often 10 KB and more.
When the query is being stopped, Spark tells an interruption by the stop from a real failure by
matching that text with a regular expression that recurses once per character
(``StreamExecution.PROXY_ERROR``): a few thousand characters overflow the stack of the query's
thread. The ``StackOverflowError`` escapes Spark's error handling, the thread dies and the query
ends with no exception and the status of a batch still running, whatever the failure was.

:func:`spark_safe` makes a ``foreachBatch`` function raise what Spark can read: the exception
alone (no chain), and when its own text is long, a :class:`ForeachBatchError` with that text cut
down: Java stack frames left out (the exception and ``Caused by`` lines stay: Spark looks there
for an interruption or a cancelled job; the job and the demo for the binlog-cdc error), at most
:data:`MAX_TEXT` characters. The whole exception is logged at DEBUG level
(``binlog_cdc.foreach_batch``).
"""

from __future__ import annotations

import functools
import logging
import re
import traceback

__all__ = ["MAX_TEXT", "ForeachBatchError", "spark_safe", "for_spark"]

log = logging.getLogger("binlog_cdc.foreach_batch")

#: the longest exception text handed to Spark (its expression takes ~2,000 characters on a
#: thread stack of 1 MB, less when it runs interpreted)
MAX_TEXT = 800
_LINE = 300                                     # the longest line kept of a long text
_JAVA_FRAME = re.compile(r"^\s+(?:at |\.\.\. \d+ more)")


class ForeachBatchError(Exception):
    """A ``foreachBatch`` function's exception whose text was too long for Spark, cut down (see
    the module); ``original`` is the exception itself."""

    def __init__(self, text: str, original: BaseException):
        super().__init__(text)
        self.original = original


def _text(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")
    except Exception:  # noqa: BLE001 - a broken __str__ (or a Java side gone) still gives a line
        return type(exc).__name__


def _cut(text: str) -> str:
    """*text* without Java stack frames, at most :data:`MAX_TEXT` characters: its first line
    and as many of its last lines as fit."""
    lines = [line if len(line) <= _LINE else line[:_LINE] + " [...]"
             for line in text.splitlines() if line.strip() and not _JAVA_FRAME.match(line)]
    if len("\n".join(lines)) <= MAX_TEXT:
        return "\n".join(lines)
    head, tail = lines[0], []
    room = MAX_TEXT - len(head) - 40
    for line in reversed(lines[1:]):
        if len(line) + 1 > room:
            break
        tail.insert(0, line)
        room -= len(line) + 1
    left_out = len(lines) - 1 - len(tail)
    return "\n".join([head, f"[... {left_out} line(s) left out]", *tail])


def for_spark(exc: Exception) -> Exception:
    """The exception to raise (``from None``) in place of *exc*: *exc* when its text is short
    and has no Java stack trace, else a :class:`ForeachBatchError` with the text cut down."""
    text = _text(exc)
    if len(text) <= MAX_TEXT and not any(_JAVA_FRAME.match(line) for line in text.splitlines()):
        return exc
    return ForeachBatchError(_cut(text), exc)


def spark_safe(func):
    """Decorate a ``foreachBatch`` function (or method): its exceptions reach Spark through
    :func:`for_spark`."""
    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as e:
            log.debug("foreachBatch failed", exc_info=True)
            raise for_spark(e) from None
    return call
