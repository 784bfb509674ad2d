"""The parts of a MySQL GTID, checked: server UUIDs (validated, lowercased, to and from their
16 bytes), tags, transaction numbers (GNOs) and their limits; and how bad GTID text is quoted in
error messages.  Shared by the GTID, GTID set and GTID event modules of this package."""

from __future__ import annotations

import re
from typing import Union

from cdc.errors import GtidError

Buffer = Union[bytes, bytearray, memoryview]

# rpl_gno is int64 and GNO_END = INT64_MAX is one past the largest valid GNO.
GNO_END = (1 << 63) - 1
#: The largest valid GNO (transaction number) of a MySQL GTID.
GNO_MAX = GNO_END - 1
#: ``mysql::gtid::tag_max_length``.
TAG_MAX_LENGTH = 32

UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
TAG_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}\Z")


def quote(text: str, limit: int = 200) -> str:
    """*text* as a repr for an error message, cut to *limit* characters."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


#: UUID texts validated already -> lowercased (a stream meets a few servers' UUIDs, once per
#: transaction each: validating each once saves a regex per GTID)
_UUIDS: dict[str, str] = {}


def norm_uuid(text: str, whole: str | None = None) -> str:
    """Validate a textual UUID (8-4-4-4-12 hex digits) and return it lowercased."""
    known = _UUIDS.get(text)
    if known is not None:
        return known
    u = text.strip()
    if not UUID_RE.match(u):
        where = f" in GTID text {quote(whole)}" if whole is not None and whole != text else ""
        raise GtidError(
            f"malformed server UUID {quote(text)}{where}: expected 36 characters like "
            f"'3e11fa47-71ca-11e1-9e33-c80aa9429562'")
    if len(_UUIDS) >= 1024:
        _UUIDS.clear()
    u = _UUIDS[text] = u.lower()
    return u


def norm_tag(tag: str | None, whole: str | None = None) -> str:
    """Validate a GTID tag and return it lowercased ('' for no tag)."""
    if tag is None or tag == "":
        return ""
    t = tag.strip()
    if not TAG_RE.match(t):
        where = f" in GTID text {quote(whole)}" if whole is not None else ""
        raise GtidError(
            f"malformed GTID tag {quote(tag)}{where}: a tag is 1-{TAG_MAX_LENGTH} characters "
            f"[a-z_][a-z0-9_]* (case-insensitive)")
    return t.lower()


def uuid_to_bytes(uuid: str) -> bytes:
    """The 16 bytes of a (valid) textual UUID."""
    return bytes.fromhex(uuid.replace("-", ""))


def uuid_from_bytes(raw: Buffer) -> str:
    """The lowercase text of a 16-byte UUID."""
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def parse_gno(text: str, whole: str) -> int:
    """The transaction number *text* (part of the GTID text *whole*), checked to be in range."""
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise GtidError(f"malformed transaction number {quote(text)} in GTID text {quote(whole)}")
    gno = int(t)
    if not 1 <= gno <= GNO_MAX:
        raise GtidError(
            f"transaction number {t} in GTID text {quote(whole)} is out of range 1..{GNO_MAX}")
    return gno
