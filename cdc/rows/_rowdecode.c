/*
 * cdc.rows._rowdecode: optional compiled decoder of the row images of one rows event.
 *
 * The pure-Python path (cdc/rows/decode.py, cdc/rows/compile.py, cdc/values/types.py) is the
 * reference; this module produces exactly the same Python values, faster.  cdc/rows/decode.py
 * (RowPlans.c_plan) builds one Plan per table map and column-presence bitmap from the binary
 * layouts of the type table (cdc.values.types.column_layout): per present column its kind (ints,
 * floats, YEAR, UTF-8 text and binary strings, DECIMAL, DATETIME2, TIMESTAMP2, TIME2, DATE, BIT)
 * or FALLBACK with the layout's arguments a and b, plus that column's own decoder from the type
 * table.  The kind names below are the Layout.kind names.  The decoder is called as
 * ``dec(data, pos) -> (value, pos)`` for FALLBACK columns and for values the native code does
 * not build itself (zero/invalid dates, malformed DECIMAL digit groups ...), so the rules for
 * rare types and odd values live in one place: cdc/values/types.py.
 *
 * Never reads past len(data): a short image raises ValueError, which cdc/rows/decode.py turns
 * into TruncatedEventError like the Python path's IndexError/struct.error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <string.h>

enum {
    K_FALLBACK = 0,
    K_I8, K_U8, K_I16, K_U16, K_I24, K_U24, K_I32, K_U32, K_I64, K_U64,
    K_FLOAT, K_DOUBLE, K_YEAR,
    K_STR,          /* a: length-prefix bytes (1-4); UTF-8 (invalid: the Python decoder) */
    K_BYTES,        /* a: length-prefix bytes (1-4); b: pad to b bytes with \0 (BINARY(n)), or 0 */
    K_DECIMAL,      /* a: precision, b: scale */
    K_DATETIME2,    /* a: fractional digits 0-6 */
    K_TIMESTAMP2,   /* a: fractional digits 0-6 */
    K_TIME2,        /* a: fractional digits 0-6 */
    K_DATE,
    K_BIT,          /* a: byte size 0-8 */
    /* Arrow's integer form of a value instead of the Python object (typed Arrow columns are
     * built from these without a Decimal/datetime/date per value; values the native code does
     * not build still come from the Python decoder, as objects): */
    K_DECIMAL_INT,  /* DECIMAL of precision <= 18 (a, b as DECIMAL): the unscaled int */
    K_DATETIME2_US, /* DATETIME2: microseconds since 1970-01-01 00:00 of its wall time */
    K_TIMESTAMP2_US,/* TIMESTAMP2: microseconds since the epoch */
    K_DATE_DAYS,    /* DATE: days since 1970-01-01 */
    K_LAST
};

/* the kind whose binary layout an integer-form kind reads */
static inline int
layout_kind(int kind)
{
    switch (kind) {
    case K_DECIMAL_INT: return K_DECIMAL;
    case K_DATETIME2_US: return K_DATETIME2;
    case K_TIMESTAMP2_US: return K_TIMESTAMP2;
    case K_DATE_DAYS: return K_DATE;
    default: return kind;
    }
}

#define MAX_GROUPS 16

typedef struct {
    int kind;
    Py_ssize_t index;       /* position in the row tuple */
    int a, b;
    Py_ssize_t size;        /* fixed byte size (0: length-prefixed) */
    PyObject *fallback;     /* the column's Python decoder */
    int row_reuse;          /* costly to build: compare with the previous row's raw bytes */
    /* DECIMAL digit groups */
    int ngroups;
    unsigned char gbytes[MAX_GROUPS];
    unsigned char gdigits[MAX_GROUPS];
    /* fractional seconds */
    int nfrac;
    int mult;
} ColSpec;

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;       /* length of the row tuples */
    Py_ssize_t npresent;    /* columns in the image */
    Py_ssize_t null_bytes;
    int full;               /* every column present, in order */
    PyObject *absent;       /* cdc.values.kinds.ABSENT */
    ColSpec *cols;
} PlanObject;

static PyObject *DecimalType = NULL;

static const unsigned char DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const long long POW10[10] = {1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL,
                                    10000000LL, 100000000LL, 1000000000LL};

/* ---- Plan ------------------------------------------------------------------------------- */

static void
plan_dealloc(PlanObject *self)
{
    if (self->cols != NULL) {
        for (Py_ssize_t k = 0; k < self->npresent; k++)
            Py_XDECREF(self->cols[k].fallback);
        PyMem_Free(self->cols);
    }
    Py_XDECREF(self->absent);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
frac_layout(int fsp, int *nfrac, int *mult)
{
    static const int mults[4] = {0, 10000, 100, 1};
    if (fsp < 0 || fsp > 6)
        return -1;
    *nfrac = (fsp + 1) / 2;
    *mult = mults[*nfrac];
    return 0;
}

static int
spec_init(ColSpec *c, PyObject *item, Py_ssize_t ncols)
{
    Py_ssize_t index;
    int kind, a, b;
    PyObject *fallback;

    if (!PyArg_ParseTuple(item, "niiiO;a column spec is (index, kind, a, b, decoder)",
                          &index, &kind, &a, &b, &fallback))
        return -1;
    if (index < 0 || index >= ncols) {
        PyErr_Format(PyExc_ValueError, "column index %zd out of range", index);
        return -1;
    }
    if (kind < 0 || kind >= K_LAST) {
        PyErr_Format(PyExc_ValueError, "unknown column kind %d", kind);
        return -1;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "a column's decoder must be callable");
        return -1;
    }
    c->kind = kind;
    c->index = index;
    c->a = a;
    c->b = b;
    c->size = 0;
    c->ngroups = 0;
    c->nfrac = 0;
    c->mult = 0;
    c->row_reuse = kind == K_DECIMAL || kind == K_DATETIME2 || kind == K_TIMESTAMP2
                   || kind == K_TIME2 || kind == K_DATE;
    if (kind == K_DECIMAL_INT && (a > 18 || a < 1)) {
        PyErr_SetString(PyExc_ValueError, "DECIMAL_INT needs a precision of 1-18");
        return -1;
    }
    kind = layout_kind(kind);
    switch (kind) {
    case K_I8: case K_U8: case K_YEAR: c->size = 1; break;
    case K_I16: case K_U16: c->size = 2; break;
    case K_I24: case K_U24: case K_DATE: c->size = 3; break;
    case K_I32: case K_U32: case K_FLOAT: c->size = 4; break;
    case K_I64: case K_U64: case K_DOUBLE: c->size = 8; break;
    case K_STR: case K_BYTES:
        if (a < 1 || a > 4 || b < 0) {
            PyErr_SetString(PyExc_ValueError, "string length prefix must be 1-4 bytes");
            return -1;
        }
        break;
    case K_BIT:
        if (a < 0 || a > 8) {
            PyErr_SetString(PyExc_ValueError, "BIT size must be 0-8 bytes");
            return -1;
        }
        c->size = a;
        break;
    case K_DATETIME2: case K_TIMESTAMP2: case K_TIME2:
        if (frac_layout(a, &c->nfrac, &c->mult) < 0) {
            PyErr_SetString(PyExc_ValueError, "fractional seconds precision must be 0-6");
            return -1;
        }
        c->size = (kind == K_DATETIME2 ? 5 : kind == K_TIMESTAMP2 ? 4 : 3) + c->nfrac;
        break;
    case K_DECIMAL: {
        int precision = a, scale = b, intg = a - b, n = 0;
        if (precision < 1 || precision > 81 || scale < 0 || scale > precision) {
            PyErr_SetString(PyExc_ValueError, "unsupported DECIMAL precision/scale");
            return -1;
        }
        /* the layout of cdc.values.decimal.decimal_groups */
        if (intg % 9) {
            c->gbytes[n] = DIG2BYTES[intg % 9];
            c->gdigits[n++] = (unsigned char)(intg % 9);
        }
        for (int g = 0; g < intg / 9 + scale / 9; g++) {
            if (n >= MAX_GROUPS)
                break;
            c->gbytes[n] = 4;
            c->gdigits[n++] = 9;
        }
        if (scale % 9 && n < MAX_GROUPS) {
            c->gbytes[n] = DIG2BYTES[scale % 9];
            c->gdigits[n++] = (unsigned char)(scale % 9);
        }
        if (intg / 9 + scale / 9 + (intg % 9 != 0) + (scale % 9 != 0) != n) {
            PyErr_SetString(PyExc_ValueError, "DECIMAL has too many digit groups");
            return -1;
        }
        c->ngroups = n;
        for (int g = 0; g < n; g++)
            c->size += c->gbytes[g];
        break;
    }
    default:
        break;
    }
    Py_INCREF(fallback);
    c->fallback = fallback;
    return 0;
}

static PyObject *
plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ncols", "columns", "absent", NULL};
    Py_ssize_t ncols;
    PyObject *columns, *absent, *seq;
    PlanObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOO:Plan", kwlist, &ncols, &columns, &absent))
        return NULL;
    if (ncols < 0) {
        PyErr_SetString(PyExc_ValueError, "ncols must be >= 0");
        return NULL;
    }
    seq = PySequence_Fast(columns, "columns must be a sequence of column specs");
    if (seq == NULL)
        return NULL;
    self = (PlanObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->ncols = ncols;
    self->npresent = 0;
    self->null_bytes = (n + 7) >> 3;
    Py_INCREF(absent);
    self->absent = absent;
    self->cols = PyMem_Calloc(n ? n : 1, sizeof(ColSpec));
    if (self->cols == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    int full = n == ncols;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (spec_init(&self->cols[k], PySequence_Fast_GET_ITEM(seq, k), ncols) < 0) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        self->npresent = k + 1;
        if (k > 0 && self->cols[k].index <= self->cols[k - 1].index) {
            PyErr_SetString(PyExc_ValueError, "column indexes must increase");
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        if (self->cols[k].index != k)
            full = 0;
    }
    self->full = full;
    Py_DECREF(seq);
    return (PyObject *)self;
}

static PyObject *
plan_kinds(PlanObject *self, void *closure)
{
    PyObject *t = PyTuple_New(self->npresent);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < self->npresent; k++) {
        PyObject *v = PyLong_FromLong(self->cols[k].kind);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

static PyGetSetDef plan_getset[] = {
    {"kinds", (getter)plan_kinds, NULL, "the kind of each present column (FALLBACK = 0)", NULL},
    {NULL}
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc.rows._rowdecode.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Plan(ncols, columns, absent): how to decode one row image of a table.\n\n"
              "columns: per present column (in order) (index, kind, a, b, decoder).",
    .tp_new = plan_new,
    .tp_getset = plan_getset,
};

/* ---- value decoding -------------------------------------------------------------------- */

static inline unsigned long long
be_uint(const unsigned char *p, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline unsigned long long
le_uint(const unsigned char *p, int n)
{
    unsigned long long v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* FLOAT (size 4) / DOUBLE (size 8), little-endian IEEE 754; NULL with an exception on error */
static PyObject *
float_value(const unsigned char *p, int size)
{
#if PY_VERSION_HEX >= 0x030B0000
    double x = size == 4 ? PyFloat_Unpack4((const char *)p, 1) : PyFloat_Unpack8((const char *)p, 1);
#else
    double x = size == 4 ? _PyFloat_Unpack4(p, 1) : _PyFloat_Unpack8(p, 1);
#endif
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(x);
}

static inline int
days_in_month(int y, int m)
{
    static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dim[m];
}

static inline int
valid_date(long long y, long long m, long long d)
{
    return y >= 1 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month((int)y, (int)m);
}

/* days since 1970-01-01 -> civil date (H. Hinnant's algorithm) */
static void
civil_from_days(long long z, int *y, int *m, int *d)
{
    z += 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long yy = (long long)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yy + (*m <= 2));
}

/* The digit groups' values of the DECIMAL at p (c->size bytes) into v, and its sign: 0, or -1
 * when a digit group is out of range (the Python decoder then decides). */
static int
decimal_groups(const ColSpec *c, const unsigned char *p, unsigned long long *v, int *negative)
{
    *negative = !(p[0] & 0x80);
    unsigned char flip = *negative ? 0xFF : 0x00;
    const unsigned char *q = p;
    for (int g = 0; g < c->ngroups; g++) {
        int nb = c->gbytes[g];
        unsigned long long x = 0;
        for (int i = 0; i < nb; i++) {
            unsigned char byte = q[i] ^ flip;
            if (q + i == p)
                byte ^= 0x80;
            x = (x << 8) | byte;
        }
        q += nb;
        if (x >= (unsigned long long)POW10[c->gdigits[g]])
            return -1;
        v[g] = x;
    }
    return 0;
}

/* The DECIMAL at p (c->size bytes): a Decimal, or NULL without an error set when a digit group
 * is out of range (the Python decoder then decides). */
static PyObject *
decode_decimal(const ColSpec *c, const unsigned char *p)
{
    char text[MAX_GROUPS * 9 + 16];
    char *t = text;
    unsigned long long groups[MAX_GROUPS];
    int negative;
    if (decimal_groups(c, p, groups, &negative) < 0)
        return NULL;
    if (negative)
        *t++ = '-';
    /* [-]<integer digits>.<scale digits>: the digit groups, zero-padded, with the point put
     * before the last `scale` digits (Decimal strips the leading zeros) */
    int intg = c->a - c->b;
    char *point = NULL;
    for (int g = 0; g < c->ngroups; g++) {
        int nd = c->gdigits[g];
        unsigned long long v = groups[g];
        if (intg == 0 && c->b && point == NULL) {
            point = t;
            *t++ = '.';
        }
        for (int i = nd - 1; i >= 0; i--) {
            t[i] = (char)('0' + v % 10);
            v /= 10;
        }
        t += nd;
        intg -= nd;
    }
    if (c->ngroups == 0)
        *t++ = '0';
    PyObject *s = PyUnicode_FromStringAndSize(text, t - text);
    if (s == NULL)
        return NULL;
    PyObject *r = PyObject_CallOneArg(DecimalType, s);
    Py_DECREF(s);
    return r;
}

/* The DATETIME2 at p as f = {year, month, day, hour, minute, second, microsecond}: 0, or -1
 * when it is no valid datetime (zero dates ...: the Python decoder decides) */
static int
datetime2_fields(const ColSpec *c, const unsigned char *p, int *f)
{
    long long packed = (long long)be_uint(p, 5) - 0x8000000000LL;
    if (packed < 0)
        return -1;
    long long us = c->nfrac ? (long long)be_uint(p + 5, c->nfrac) * c->mult : 0;
    long long ymd = packed >> 17, hms = packed & 0x1FFFF;
    long long ym = ymd >> 5;
    long long y = ym / 13, mo = ym % 13, d = ymd & 31;
    int h = (int)(hms >> 12), mi = (int)((hms >> 6) & 63), s = (int)(hms & 63);
    if (!valid_date(y, mo, d) || h > 23 || mi > 59 || s > 59 || us > 999999)
        return -1;
    f[0] = (int)y, f[1] = (int)mo, f[2] = (int)d, f[3] = h, f[4] = mi, f[5] = s, f[6] = (int)us;
    return 0;
}

static PyObject *
decode_datetime2(const ColSpec *c, const unsigned char *p)
{
    int f[7];
    if (datetime2_fields(c, p, f) < 0)
        return NULL;
    return PyDateTime_FromDateAndTime(f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
}

/* The TIMESTAMP2 at p as seconds and microseconds since the epoch: 0, or -1 for the zero
 * timestamp or an invalid fraction (the Python decoder decides) */
static int
timestamp2_fields(const ColSpec *c, const unsigned char *p, long long *secs, long long *us)
{
    *secs = (long long)be_uint(p, 4);
    *us = c->nfrac ? (long long)be_uint(p + 4, c->nfrac) * c->mult : 0;
    return (*secs == 0 && *us == 0) || *us > 999999 ? -1 : 0;
}

static PyObject *
decode_timestamp2(const ColSpec *c, const unsigned char *p)
{
    long long secs, us;
    if (timestamp2_fields(c, p, &secs, &us) < 0)
        return NULL;
    int y, m, d;
    civil_from_days(secs / 86400, &y, &m, &d);
    long long rem = secs % 86400;
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        y, m, d, (int)(rem / 3600), (int)((rem / 60) % 60), (int)(rem % 60), (int)us,
        PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
}

static PyObject *
decode_time2(const ColSpec *c, const unsigned char *p)
{
    long long packed;
    if (c->nfrac == 3) {
        packed = (long long)be_uint(p, 6) - 0x800000000000LL;
    }
    else {
        long long intpart = (long long)be_uint(p, 3) - 0x800000LL;
        if (c->nfrac == 0) {
            packed = intpart * (1LL << 24);
        }
        else {
            long long frac = (long long)be_uint(p + 3, c->nfrac);
            if (intpart < 0 && frac) {
                intpart += 1;
                frac -= c->nfrac == 1 ? 0x100 : 0x10000;
            }
            packed = intpart * (1LL << 24) + frac * (c->nfrac == 1 ? 10000 : 100);
        }
    }
    int negative = packed < 0;
    if (negative)
        packed = -packed;
    long long hms = packed >> 24, us = packed & 0xFFFFFF;
    long long total = ((((hms >> 12) & 0x3FF) * 60 + ((hms >> 6) & 63)) * 60 + (hms & 63))
                      * 1000000LL + us;
    if (negative)
        total = -total;
    /* timedelta's normal form: days, 0 <= seconds < 86400, 0 <= microseconds < 10**6 */
    const long long day_us = 86400LL * 1000000LL;
    long long days = total / day_us, rem = total % day_us;
    if (rem < 0) {
        rem += day_us;
        days -= 1;
    }
    return PyDateTimeAPI->Delta_FromDelta((int)days, (int)(rem / 1000000), (int)(rem % 1000000),
                                          1, PyDateTimeAPI->DeltaType);
}

/* The DATE at p: 0, or -1 when it is no valid date (the Python decoder decides) */
static int
date_fields(const unsigned char *p, int *y, int *m, int *d)
{
    unsigned long v = (unsigned long)le_uint(p, 3);
    *d = v & 31, *m = (v >> 5) & 15, *y = (int)(v >> 9);
    return valid_date(*y, *m, *d) ? 0 : -1;
}

static PyObject *
decode_date(const unsigned char *p)
{
    int y, m, d;
    if (date_fields(p, &y, &m, &d) < 0)
        return NULL;
    return PyDate_FromDate(y, m, d);
}

/* days since 1970-01-01 of a civil date (H. Hinnant's algorithm) */
static long long
days_from_civil(long long y, int m, int d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

/* K_DECIMAL_INT: the unscaled value of the DECIMAL at p (precision <= 18), or NULL without an
 * error set when a digit group is out of range (as decode_decimal) */
static PyObject *
decimal_int(const ColSpec *c, const unsigned char *p)
{
    unsigned long long groups[MAX_GROUPS];
    int negative;
    if (decimal_groups(c, p, groups, &negative) < 0)
        return NULL;
    long long u = 0;
    for (int g = 0; g < c->ngroups; g++)
        u = u * POW10[c->gdigits[g]] + (long long)groups[g];   /* < 10**18: no overflow */
    return PyLong_FromLongLong(negative ? -u : u);
}

/* K_DATETIME2_US: NULL without an error set where decode_datetime2 gives NULL */
static PyObject *
datetime2_us(const ColSpec *c, const unsigned char *p)
{
    int f[7];
    if (datetime2_fields(c, p, f) < 0)
        return NULL;
    long long secs = days_from_civil(f[0], f[1], f[2]) * 86400LL + f[3] * 3600LL + f[4] * 60LL
                     + f[5];
    return PyLong_FromLongLong(secs * 1000000LL + f[6]);
}

/* K_TIMESTAMP2_US: NULL without an error set where decode_timestamp2 gives NULL */
static PyObject *
timestamp2_us(const ColSpec *c, const unsigned char *p)
{
    long long secs, us;
    if (timestamp2_fields(c, p, &secs, &us) < 0)
        return NULL;
    return PyLong_FromLongLong(secs * 1000000LL + us);
}

/* K_DATE_DAYS: NULL without an error set where decode_date gives NULL */
static PyObject *
date_days(const unsigned char *p)
{
    int y, m, d;
    if (date_fields(p, &y, &m, &d) < 0)
        return NULL;
    return PyLong_FromLongLong(days_from_civil(y, m, d));
}

/* The column's Python decoder at pos: the value (new reference); *ppos is moved. */
static PyObject *
call_fallback(const ColSpec *c, PyObject *data, Py_ssize_t len, Py_ssize_t *ppos)
{
    PyObject *posobj = PyLong_FromSsize_t(*ppos);
    if (posobj == NULL)
        return NULL;
    PyObject *args[2] = {data, posobj};
    PyObject *res = PyObject_Vectorcall(c->fallback, args, 2, NULL);
    Py_DECREF(posobj);
    if (res == NULL)
        return NULL;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_TypeError, "a column decoder must return (value, position)");
        return NULL;
    }
    Py_ssize_t newpos = PyLong_AsSsize_t(PyTuple_GET_ITEM(res, 1));
    if (newpos == -1 && PyErr_Occurred()) {
        Py_DECREF(res);
        return NULL;
    }
    if (newpos < *ppos || newpos > len) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_ValueError, "row image runs past the end of the event");
        return NULL;
    }
    PyObject *value = PyTuple_GET_ITEM(res, 0);
    Py_INCREF(value);
    Py_DECREF(res);
    *ppos = newpos;
    return value;
}

/* What the before image of an update held for one column: its raw bytes and value. */
typedef struct {
    Py_ssize_t off;         /* -1: nothing to reuse (NULL, or a Python-decoded value) */
    Py_ssize_t len;
    PyObject *value;        /* borrowed from the before tuple */
} Raw;

static int
short_image(void)
{
    PyErr_SetString(PyExc_ValueError, "row image runs past the end of the event");
    return -1;
}

static inline int
gc_tracked(PyObject *v)
{
    return PyObject_IS_GC(v) && PyObject_GC_IsTracked(v);
}

/* The NULL bitmap of an image at pos: where the values start, or -1 with an error set. */
static inline Py_ssize_t
after_null_bitmap(const PlanObject *pl, Py_ssize_t len, Py_ssize_t pos)
{
    if (pl->null_bytes > len - pos) {
        PyErr_SetString(PyExc_ValueError, "row image null bitmap runs past the end of the event");
        return -1;
    }
    return pos + pl->null_bytes;
}

/* Where the raw bytes of a natively read value at start end (its body, after a length prefix,
 * in *body), or -1 with an error set. */
static inline Py_ssize_t
native_value_end(const ColSpec *c, const unsigned char *buf, Py_ssize_t len, Py_ssize_t start,
                 Py_ssize_t *body)
{
    Py_ssize_t n = c->size;
    *body = start;
    if (c->kind == K_STR || c->kind == K_BYTES) {
        if (c->a > len - start)
            return short_image();
        unsigned long long vlen = le_uint(buf + start, c->a);
        *body = start + c->a;
        if (vlen > (unsigned long long)(len - *body))
            return short_image();
        n = (Py_ssize_t)vlen;
    }
    else if (n > len - start) {
        return short_image();
    }
    return *body + n;
}

/* One row image at *ppos (NULL bitmap first): a new tuple, or NULL with an error set.
 * rec: where this image's native values and their raw bytes are recorded; the previous row's
 * DECIMAL/temporal values there are reused when the bytes are the same (a costly Decimal or
 * datetime built once for, say, the NOW() of a multi-row INSERT).
 * prev (an update's after image): a native value whose raw bytes equal the before image's
 * (same column) is that value.
 * cols (decode_columns): a list of ncols lists instead of a tuple: each column's value (ABSENT
 * for a column the image does not hold) is appended to its list, and Py_None is returned
 * (borrowed; the appended values are then all the caller has of the row).
 * A tuple holding no GC-tracked object (every native value, most decoded ones) is untracked
 * at once, as the garbage collector would do on its next pass: a big transaction's rows do
 * not make every collection slower. */
static PyObject *
read_image(const PlanObject *pl, PyObject *data, const unsigned char *buf, Py_ssize_t len,
           Py_ssize_t *ppos, Raw *rec, const Raw *prev, PyObject *cols)
{
    int tracked = 0;
    const unsigned char *nulls = buf + *ppos;
    Py_ssize_t pos = after_null_bitmap(pl, len, *ppos);
    if (pos < 0)
        return NULL;
    PyObject *row = NULL;
    if (cols != NULL) {
        /* the columns the image does not hold: ABSENT (present indexes are ascending) */
        for (Py_ssize_t i = 0, k = 0; !pl->full && i < pl->ncols; i++) {
            if (k < pl->npresent && pl->cols[k].index == i) {
                k++;
                continue;
            }
            if (PyList_Append(PyList_GET_ITEM(cols, i), pl->absent) < 0)
                return NULL;
        }
        goto values;
    }
    row = PyTuple_New(pl->ncols);
    if (row == NULL)
        return NULL;
    if (!pl->full) {
        tracked = gc_tracked(pl->absent);
        for (Py_ssize_t i = 0; i < pl->ncols; i++) {
            Py_INCREF(pl->absent);
            PyTuple_SET_ITEM(row, i, pl->absent);
        }
    }
values:
    for (Py_ssize_t k = 0; k < pl->npresent; k++) {
        const ColSpec *c = &pl->cols[k];
        PyObject *v = NULL;
        Py_ssize_t start = pos;
        if (nulls[k >> 3] & (1 << (k & 7))) {
            v = Py_None;
            Py_INCREF(v);
            if (rec)
                rec[k].off = -1;
            goto store;
        }
        if (c->kind == K_FALLBACK) {
        fallback:   /* also from below: a value the native code does not build */
            v = call_fallback(c, data, len, &pos);
            if (v == NULL)
                goto fail;
            tracked |= gc_tracked(v);
            if (rec)
                rec[k].off = -1;
            goto store;
        }
        /* native: find the raw bytes [start, pos) first */
        Py_ssize_t body;
        pos = native_value_end(c, buf, len, start, &body);
        if (pos < 0)
            goto fail;
        Py_ssize_t n = pos - body;
        const Raw *same = prev ? &prev[k] : rec && c->row_reuse ? &rec[k] : NULL;
        if (same && same->off >= 0 && same->len == pos - start
                && memcmp(buf + same->off, buf + start, pos - start) == 0) {
            v = same->value;        /* immutable and a pure function of the bytes */
            Py_INCREF(v);
            goto store_native;
        }
        const unsigned char *p = buf + body;
        switch (c->kind) {
        case K_I8: v = PyLong_FromLong((signed char)p[0]); break;
        case K_U8: v = PyLong_FromLong(p[0]); break;
        case K_I16: v = PyLong_FromLong((short)(unsigned short)le_uint(p, 2)); break;
        case K_U16: v = PyLong_FromLong((long)le_uint(p, 2)); break;
        case K_I24: {
            long x = (long)le_uint(p, 3);
            v = PyLong_FromLong(x & 0x800000 ? x - 0x1000000 : x);
            break;
        }
        case K_U24: v = PyLong_FromLong((long)le_uint(p, 3)); break;
        case K_I32: v = PyLong_FromLong((long)(int)(unsigned int)le_uint(p, 4)); break;
        case K_U32: v = PyLong_FromUnsignedLong((unsigned long)le_uint(p, 4)); break;
        case K_I64: v = PyLong_FromLongLong((long long)le_uint(p, 8)); break;
        case K_U64: v = PyLong_FromUnsignedLongLong(le_uint(p, 8)); break;
        case K_FLOAT: v = float_value(p, 4); break;
        case K_DOUBLE: v = float_value(p, 8); break;
        case K_YEAR: v = PyLong_FromLong(p[0] ? 1900 + p[0] : 0); break;
        case K_BIT: v = PyLong_FromUnsignedLongLong(be_uint(p, c->a)); break;
        case K_STR:
            v = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
            if (v == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                PyErr_Clear();  /* invalid UTF-8: the Python decoder's InvalidText (below) */
            break;
        case K_BYTES:
            if (c->b > n) {
                v = PyBytes_FromStringAndSize(NULL, c->b);
                if (v != NULL) {
                    memcpy(PyBytes_AS_STRING(v), p, n);
                    memset(PyBytes_AS_STRING(v) + n, 0, c->b - n);
                }
            }
            else {
                v = PyBytes_FromStringAndSize((const char *)p, n);
            }
            break;
        case K_DECIMAL: v = decode_decimal(c, p); break;
        case K_DATETIME2: v = decode_datetime2(c, p); break;
        case K_TIMESTAMP2: v = decode_timestamp2(c, p); break;
        case K_TIME2: v = decode_time2(c, p); break;
        case K_DATE: v = decode_date(p); break;
        case K_DECIMAL_INT: v = decimal_int(c, p); break;
        case K_DATETIME2_US: v = datetime2_us(c, p); break;
        case K_TIMESTAMP2_US: v = timestamp2_us(c, p); break;
        case K_DATE_DAYS: v = date_days(p); break;
        default:
            PyErr_SetString(PyExc_SystemError, "unknown column kind");
            goto fail;
        }
        if (v == NULL) {
            if (PyErr_Occurred())
                goto fail;
            /* a value the native code does not build (zero date, odd DECIMAL digits ...):
             * the Python decoder decides, from the same position */
            pos = start;
            goto fallback;
        }
    store_native:
        if (rec) {
            rec[k].off = start;
            rec[k].len = pos - start;
            rec[k].value = v;
        }
    store:
        if (cols != NULL) {
            /* the list keeps v alive for rec (the caller holds the lists for the call) */
            int rc = PyList_Append(PyList_GET_ITEM(cols, c->index), v);
            Py_DECREF(v);
            if (rc < 0)
                return NULL;
            continue;
        }
        PyTuple_SET_ITEM(row, c->index, v);
        if (!pl->full)
            Py_DECREF(pl->absent);      /* the slot held ABSENT */
        continue;
    fail:
        Py_XDECREF(row);
        return NULL;
    }
    *ppos = pos;
    if (cols != NULL)
        return Py_None;
    if (!tracked)
        PyObject_GC_UnTrack(row);
    return row;
}

/* The arguments (data, pos, plan, after_plan=None) of decode_rows and count_rows, with data's
 * buffer in *view (release it): 0, or -1 with an error set (and no buffer held). */
static int
rows_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t *pos,
          const PlanObject **p1, const PlanObject **p2, Py_buffer *view)
{
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError, "%s(data, pos, plan, after_plan=None)", name);
        return -1;
    }
    *pos = PyLong_AsSsize_t(args[1]);
    if (*pos == -1 && PyErr_Occurred())
        return -1;
    if (!PyObject_TypeCheck(args[2], &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "plan must be a cdc.rows._rowdecode.Plan");
        return -1;
    }
    *p1 = (const PlanObject *)args[2];
    *p2 = NULL;
    if (nargs == 4 && args[3] != Py_None) {
        if (!PyObject_TypeCheck(args[3], &PlanType)) {
            PyErr_SetString(PyExc_TypeError, "after_plan must be a cdc.rows._rowdecode.Plan or None");
            return -1;
        }
        *p2 = (const PlanObject *)args[3];
    }
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0)
        return -1;
    if (*pos < 0 || *pos > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "start position outside the event");
        return -1;
    }
    return 0;
}

/* A list of ncols lists (decode_columns' out / after_out): 0, or -1 with an error set. */
static int
check_columns(const char *what, PyObject *cols, const PlanObject *pl)
{
    int ok = PyList_CheckExact(cols) && PyList_GET_SIZE(cols) == pl->ncols;
    for (Py_ssize_t i = 0; ok && i < pl->ncols; i++)
        ok = PyList_CheckExact(PyList_GET_ITEM(cols, i));
    if (!ok)
        PyErr_Format(PyExc_TypeError, "%s must be a list of one list per column", what);
    return ok ? 0 : -1;
}

/* decode_rows (out NULL: a list of rows) and decode_columns (the values appended to out and
 * after_out: the number of rows), args being (data, pos, plan, after_plan, ...). */
static PyObject *
decode_images(const char *name, PyObject *const *args, PyObject *out, PyObject *after_out)
{
    Py_ssize_t pos;
    const PlanObject *p1, *p2;
    Py_buffer view;
    if (rows_args(name, args, 4, &pos, &p1, &p2, &view) < 0)
        return NULL;
    PyObject *data = args[0];
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, n = 0;
    PyObject *rows = NULL;
    Raw *raws = NULL;
    if (out != NULL && (check_columns("out", out, p1) < 0 ||
                        (p2 != NULL && check_columns("after_out", after_out, p2) < 0)))
        goto done;
    /* The raw bytes and values of the last (before) image: an update's after-image value whose
     * bytes equal the before image's is that same immutable object, as on the Python path;
     * DECIMAL/temporal values equal to the previous row's too. Cheap values (ints, floats,
     * strings) are not compared across rows: that costs more than it saves when they differ. */
    raws = PyMem_Malloc((p1->npresent ? p1->npresent : 1) * sizeof(Raw));
    if (raws == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < p1->npresent; k++)
        raws[k].off = -1;
    if (out == NULL && (rows = PyList_New(0)) == NULL)
        goto done;
    while (pos < len) {
        Py_ssize_t before_pos = pos;
        PyObject *row = read_image(p1, data, buf, len, &pos, raws, NULL, out);
        if (row == NULL)
            goto error;
        if (p2 != NULL) {
            PyObject *after = read_image(p2, data, buf, len, &pos, NULL,
                                         p2 == p1 ? raws : NULL, after_out);
            if (after == NULL) {
                if (out == NULL)
                    Py_DECREF(row);
                goto error;
            }
            if (out == NULL) {
                PyObject *pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(row);
                    Py_DECREF(after);
                    goto error;
                }
                PyTuple_SET_ITEM(pair, 0, row);
                PyTuple_SET_ITEM(pair, 1, after);
                if (!PyObject_GC_IsTracked(row) && !PyObject_GC_IsTracked(after))
                    PyObject_GC_UnTrack(pair);
                row = pair;
            }
        }
        if (out == NULL) {
            int rc = PyList_Append(rows, row);
            Py_DECREF(row);
            if (rc < 0)
                goto error;
        }
        if (pos == before_pos) {
            PyErr_SetString(PyExc_ValueError, "row image of no bytes (no column in the image)");
            goto error;
        }
        n++;
    }
    if (out != NULL)
        rows = PyLong_FromSsize_t(n);
    goto done;
error:
    Py_CLEAR(rows);
done:
    PyMem_Free(raws);
    PyBuffer_Release(&view);
    return rows;
}

static PyObject *
decode_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "decode_rows(data, pos, plan, after_plan=None)");
        return NULL;
    }
    PyObject *full[4] = {args[0], args[1], args[2], nargs == 4 ? args[3] : Py_None};
    return decode_images("decode_rows", full, NULL, NULL);
}

static PyObject *
decode_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_columns(data, pos, plan, after_plan, out, after_out)");
        return NULL;
    }
    return decode_images("decode_columns", args, args[4], args[5]);
}

/* Where one row image at pos (NULL bitmap first) ends, without building its values (a column
 * the native code does not read still goes through its Python decoder, whose value is dropped):
 * -1 with an error set. */
static Py_ssize_t
skip_image(const PlanObject *pl, PyObject *data, const unsigned char *buf, Py_ssize_t len,
           Py_ssize_t pos)
{
    const unsigned char *nulls = buf + pos;
    pos = after_null_bitmap(pl, len, pos);
    for (Py_ssize_t k = 0; pos >= 0 && k < pl->npresent; k++) {
        const ColSpec *c = &pl->cols[k];
        if (nulls[k >> 3] & (1 << (k & 7)))
            continue;
        if (c->kind == K_FALLBACK) {
            PyObject *v = call_fallback(c, data, len, &pos);
            if (v == NULL)
                return -1;
            Py_DECREF(v);
            continue;
        }
        Py_ssize_t body;
        pos = native_value_end(c, buf, len, pos, &body);
    }
    return pos;
}

static PyObject *
count_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t pos;
    const PlanObject *p1, *p2;
    Py_buffer view;
    if (rows_args("count_rows", args, nargs, &pos, &p1, &p2, &view) < 0)
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, n = 0;
    PyObject *result = NULL;
    while (pos < len) {
        Py_ssize_t before_pos = pos;
        pos = skip_image(p1, args[0], buf, len, pos);
        if (pos >= 0 && p2 != NULL)
            pos = skip_image(p2, args[0], buf, len, pos);
        if (pos < 0)
            goto done;
        if (pos == before_pos) {
            PyErr_SetString(PyExc_ValueError, "row image of no bytes (no column in the image)");
            goto done;
        }
        n++;
    }
    result = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_rows", (PyCFunction)(void (*)(void))decode_rows, METH_FASTCALL,
     "decode_rows(data, pos, plan, after_plan=None) -> list\n\n"
     "Every row image of a rows event body from pos to the end of data: a list of tuples, or\n"
     "of (before, after) tuple pairs when after_plan is given (updates)."},
    {"decode_columns", (PyCFunction)(void (*)(void))decode_columns, METH_FASTCALL,
     "decode_columns(data, pos, plan, after_plan, out, after_out) -> int\n\n"
     "decode_rows(data, pos, plan, after_plan) column by column: each row's values are\n"
     "appended to out (a list of one list per column; after_out: the after images' when\n"
     "after_plan is given, else None); returns the number of rows. The same values and\n"
     "errors; on an error the lists hold the rows before it, in part."},
    {"count_rows", (PyCFunction)(void (*)(void))count_rows, METH_FASTCALL,
     "count_rows(data, pos, plan, after_plan=None) -> int\n\n"
     "len(decode_rows(...)) without building the rows (the same errors for images that do\n"
     "not fit)."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "cdc.rows._rowdecode",
    "Compiled row-image decoder (optional; cdc.rows.decode falls back to pure Python).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__rowdecode(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    if (DecimalType == NULL) {
        PyObject *decimal = PyImport_ImportModule("decimal");
        if (decimal == NULL)
            return NULL;
        DecimalType = PyObject_GetAttrString(decimal, "Decimal");
        Py_DECREF(decimal);
        if (DecimalType == NULL)
            return NULL;
    }
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PlanType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(&PlanType);
        Py_DECREF(m);
        return NULL;
    }
    static const struct { const char *name; int value; } kinds[] = {
        {"FALLBACK", K_FALLBACK}, {"I8", K_I8}, {"U8", K_U8}, {"I16", K_I16}, {"U16", K_U16},
        {"I24", K_I24}, {"U24", K_U24}, {"I32", K_I32}, {"U32", K_U32}, {"I64", K_I64},
        {"U64", K_U64}, {"FLOAT", K_FLOAT}, {"DOUBLE", K_DOUBLE}, {"YEAR", K_YEAR},
        {"STR", K_STR}, {"BYTES", K_BYTES}, {"DECIMAL", K_DECIMAL}, {"DATETIME2", K_DATETIME2},
        {"TIMESTAMP2", K_TIMESTAMP2}, {"TIME2", K_TIME2}, {"DATE", K_DATE}, {"BIT", K_BIT},
        {"DECIMAL_INT", K_DECIMAL_INT}, {"DATETIME2_US", K_DATETIME2_US},
        {"TIMESTAMP2_US", K_TIMESTAMP2_US}, {"DATE_DAYS", K_DATE_DAYS},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (PyModule_AddIntConstant(m, kinds[i].name, kinds[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
