"""MySQL's binary temporal values in row images: YEAR, DATE, TIME, DATETIME, TIMESTAMP.

One value-decoder factory per type (``factory(column) -> decoder``, the decoder being
``decoder(buf, pos) -> (value, position after it)``), used by the type table
(:mod:`cdc.values.types`), and the helpers the generated row readers (:mod:`cdc.rows.compile`)
share with them.  DATE and DATETIME values Python cannot hold (zero dates, month 0 ...) come out
as :class:`~cdc.values.kinds.InvalidTemporal` with the text MySQL prints; TIMESTAMPs are aware
(UTC) datetimes; TIMEs are ``timedelta`` (negative or over 24 hours allowed).
"""

from __future__ import annotations

import datetime as _dt
import struct
import sys

from cdc.errors import ParseError, TruncatedEventError
from cdc.values.kinds import InvalidTemporal

__all__ = ["OLD_TEMPORAL_ADVICE", "datetime_from_text", "old_temporal_error", "fraction_bytes", "make_datetime", "date_factory", "datetime_factory",
           "datetime2_factory", "timestamp_factory", "timestamp2_factory", "time_factory",
           "time2_factory", "year_factory"]

UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)

if sys.version_info >= (3, 11):
    datetime_from_text = _dt.datetime.fromisoformat
else:
    def datetime_from_text(text: str, _parse=_dt.datetime.fromisoformat):
        """``datetime.fromisoformat`` of MySQL's DATETIME text (``2024-01-02 03:04:05.5``):
        Python 3.10's takes 3 or 6 fraction digits only, so a DATETIME(1, 2, 4 or 5) value's
        fraction is padded to 6 (3.11 takes every length)."""
        if len(text) > 20 and text[19] == "." and len(text) != 26:
            text = text[:20] + text[20:].ljust(6, "0")
        return _parse(text)


def _need(buf, end: int) -> None:
    if end > len(buf):
        raise TruncatedEventError("row image runs past the end of the event")


def fraction_bytes(fsp: int) -> tuple[int, int]:
    """Fractional seconds of *fsp* digits (0-6): (stored bytes, microseconds per stored unit)."""
    nbytes = (fsp + 1) // 2
    mult = {0: 0, 1: 10000, 2: 100, 3: 1}[nbytes]
    return nbytes, mult


def _fmt_frac(us: int, fsp: int) -> str:
    return ("." + ("%06d" % us)[:fsp]) if fsp else ""


def date_factory(_col):
    def dec(buf, pos):
        v = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        d, m, y = v & 31, (v >> 5) & 15, v >> 9
        try:
            return _dt.date(y, m, d), pos + 3
        except ValueError:
            return InvalidTemporal("%04d-%02d-%02d" % (y, m, d)), pos + 3
    return dec


def make_datetime(y, mo, d, h, mi, s, us, fsp):
    """A ``datetime``, or the :class:`InvalidTemporal` text of an impossible one (fsp digits)."""
    try:
        return _dt.datetime(y, mo, d, h, mi, s, us)
    except ValueError:
        return InvalidTemporal("%04d-%02d-%02d %02d:%02d:%02d%s" % (y, mo, d, h, mi, s, _fmt_frac(us, fsp)))


def datetime2_factory(col):
    fsp = col.meta or 0
    nfrac, mult = fraction_bytes(fsp)
    size = 5 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        packed = int.from_bytes(buf[pos:pos + 5], "big") - 0x8000000000
        us = int.from_bytes(buf[pos + 5:end], "big") * mult if nfrac else 0
        ymd = packed >> 17
        hms = packed & 0x1FFFF
        ym = ymd >> 5
        return make_datetime(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                              us, fsp), end
    return dec


# MariaDB's pre-5.6 ("hires", mysql56_temporal_format=OFF) layouts of TIMESTAMP(n), DATETIME(n)
# and TIME(n) with n > 0: the binlog keeps the old type codes and no precision, so the decoder
# needs n from elsewhere (information_schema; ColumnDef.meta).  Sizes by n (sql/field.cc).
_DATETIME_HIRES_BYTES = (8, 6, 6, 7, 7, 7, 8)
_TIME_HIRES_BYTES = (3, 4, 4, 5, 5, 5, 6)
_TIMESTAMP_FRAC_BYTES = (0, 1, 1, 2, 2, 3, 3)
_TIME_ZERO_POINT_US = (838 * 3600 + 59 * 60 + 59 + 1) * 1000000


OLD_TEMPORAL_ADVICE = ("decode it from a live server (ReplicaClient reads the precision from "
                       "information_schema), or rebuild the table with "
                       "mysql56_temporal_format=ON (ALTER TABLE ... FORCE)")
"""What to do about a pre-5.6 temporal column whose precision a binlog alone does not give."""


def old_temporal_error(type_name: str, detail: str) -> ParseError:
    """The error of a pre-5.6 temporal value that does not decode without its precision."""
    return ParseError(
        f"{type_name} value in the pre-5.6 binary format does not decode ({detail}): the column "
        f"probably has fractional seconds written with MariaDB's mysql56_temporal_format=OFF, "
        f"whose precision the binlog does not carry; {OLD_TEMPORAL_ADVICE}")


def _unpack_hires(packed_us: int):
    """MariaDB's unpack_time(): microseconds, seconds, minutes, hours (day * 24 + hour), and the
    day, month and year above them."""
    v, us = divmod(packed_us, 1000000)
    v, s = divmod(v, 60)
    v, mi = divmod(v, 60)
    return us, s, mi, v


def _datetime_hires_factory(fsp: int):
    size = _DATETIME_HIRES_BYTES[fsp]
    unshift = 10 ** (6 - fsp)

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        us, s, mi, v = _unpack_hires(int.from_bytes(buf[pos:end], "big") * unshift)
        v, h = divmod(v, 24)
        v, d = divmod(v, 32)
        y, mo = divmod(v, 13)
        if y > 9999:
            raise old_temporal_error(f"DATETIME({fsp})", f"year {y}")
        return make_datetime(y, mo, d, h, mi, s, us, fsp), end
    return dec


def datetime_factory(col):
    fsp = col.meta
    if fsp:
        return _datetime_hires_factory(fsp)

    def dec(buf, pos):
        v = struct.unpack_from("<Q", buf, pos)[0]
        d, t = divmod(v, 1000000)
        y, mo, dd, h, mi, s = d // 10000, (d // 100) % 100, d % 100, t // 10000, (t // 100) % 100, t % 100
        if fsp is None and (y > 9999 or mo > 12 or dd > 31 or h > 23 or mi > 59 or s > 59):
            # YYYYMMDDhhmmss of a real value: these bytes are another layout
            raise old_temporal_error("DATETIME", f"{v} is not YYYYMMDDhhmmss")
        return make_datetime(y, mo, dd, h, mi, s, 0, 0), pos + 8
    return dec


def timestamp2_factory(col):
    fsp = col.meta or 0
    nfrac, mult = fraction_bytes(fsp)
    size = 4 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        secs = int.from_bytes(buf[pos:pos + 4], "big")
        us = int.from_bytes(buf[pos + 4:end], "big") * mult if nfrac else 0
        if secs == 0 and us == 0:
            return InvalidTemporal("0000-00-00 00:00:00" + _fmt_frac(0, fsp)), end
        return _EPOCH + _dt.timedelta(seconds=secs, microseconds=us), end
    return dec


def timestamp_factory(col):
    fsp = col.meta
    if fsp:
        nfrac = _TIMESTAMP_FRAC_BYTES[fsp]
        size = 4 + nfrac
        unshift = 10 ** (6 - fsp)

        top = 10 ** fsp

        def dec_hires(buf, pos):
            end = pos + size
            _need(buf, end)
            secs = int.from_bytes(buf[pos:pos + 4], "big")
            frac = int.from_bytes(buf[pos + 4:end], "big")
            if frac >= top:
                raise old_temporal_error(f"TIMESTAMP({fsp})", f"fraction {frac} of over {fsp} "
                                                              f"digits")
            us = frac * unshift
            if secs == 0 and us == 0:
                return InvalidTemporal("0000-00-00 00:00:00" + _fmt_frac(0, fsp)), end
            return _EPOCH + _dt.timedelta(seconds=secs, microseconds=us), end
        return dec_hires

    def dec(buf, pos):
        secs = struct.unpack_from("<I", buf, pos)[0]
        if secs == 0:
            return InvalidTemporal("0000-00-00 00:00:00"), pos + 4
        return _EPOCH + _dt.timedelta(seconds=secs), pos + 4
    return dec


def time2_factory(col):
    fsp = col.meta or 0
    nfrac = (fsp + 1) // 2
    size = 3 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        if nfrac == 3:
            packed = int.from_bytes(buf[pos:end], "big") - 0x800000000000
        else:
            intpart = int.from_bytes(buf[pos:pos + 3], "big") - 0x800000
            if nfrac == 0:
                packed = intpart << 24
            else:
                frac = int.from_bytes(buf[pos + 3:end], "big")
                if intpart < 0 and frac:
                    intpart += 1
                    frac -= 0x100 if nfrac == 1 else 0x10000
                packed = (intpart << 24) + frac * (10000 if nfrac == 1 else 100)
        negative = packed < 0
        if negative:
            packed = -packed
        hms = packed >> 24
        us = packed & 0xFFFFFF
        td = _dt.timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 63, seconds=hms & 63,
                           microseconds=us)
        return (-td if negative else td), end
    return dec


def time_factory(col):
    fsp = col.meta
    if fsp:
        size = _TIME_HIRES_BYTES[fsp]
        unshift = 10 ** (6 - fsp)
        zero = _TIME_ZERO_POINT_US // unshift

        def dec_hires(buf, pos):
            end = pos + size
            _need(buf, end)
            packed = (int.from_bytes(buf[pos:end], "big") - zero) * unshift
            if not -_TIME_ZERO_POINT_US < packed < _TIME_ZERO_POINT_US:
                raise old_temporal_error(f"TIME({fsp})", f"{packed} microseconds")
            negative = packed < 0
            us, s, mi, h = _unpack_hires(-packed if negative else packed)
            td = _dt.timedelta(hours=h, minutes=mi, seconds=s, microseconds=us)
            return (-td if negative else td), end
        return dec_hires

    def dec(buf, pos):
        v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
        negative = v < 0
        v = abs(v)
        if fsp is None and (v > 8385959 or (v // 100) % 100 > 59 or v % 100 > 59):
            # [-]hhhmmss of a real value (at most 838:59:59): these bytes are another layout
            raise old_temporal_error("TIME", f"{v} is not hhhmmss")
        td = _dt.timedelta(hours=v // 10000, minutes=(v // 100) % 100, seconds=v % 100)
        return (-td if negative else td), pos + 3
    return dec


def year_factory(_col):
    def dec(buf, pos):
        v = buf[pos]
        return (1900 + v if v else 0), pos + 1
    return dec
