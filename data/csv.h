/* csv: a tokenizer for CSV text held in memory, built for large numeric tables.
 *
 * Grammar (RFC 4180, with the leniencies below): records end at LF or CRLF; cells are separated
 * by commas; a cell whose first non-blank byte is a double quote is quoted, may hold commas,
 * line ends and doubled quotes ("" stands for "), and may be followed by spaces or tabs only.
 * A quote inside an unquoted cell is an ordinary byte, and so is a CR not followed by LF.
 * Lines that are empty or hold only spaces and tabs are skipped; a UTF-8 byte order mark at the
 * start is skipped; the last record needs no line end.
 *
 * Speed: cells are views (pointer, length) into the caller's text, so a record costs no
 * allocation once the reader's arrays have grown to the widest record. Only quoted cells that
 * hold doubled quotes are copied, unescaped, into a scratch buffer the reader owns.
 *
 * Caps: at most CSV_MAX_CELLS cells per record; the scratch buffer never exceeds the length of
 * one record of the input.
 *
 * Ownership: the reader borrows the text, which must outlive it; a record's cells stay valid
 * until the next csv_reader_next() or csv_reader_free(). Cells are not NUL-terminated. */
#ifndef TRAINYARD_WORKER_CSV_H
#define TRAINYARD_WORKER_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "util/dynbuf.h"

#define CSV_MAX_CELLS (1u << 20)

typedef struct csv_cell {
    const char *ptr; /* into the text, or into the reader's scratch buffer */
    size_t len;
} csv_cell;

typedef struct csv_record {
    const csv_cell *cells; /* n cells, owned by the reader */
    size_t n;
    size_t line;  /* 1-based physical line where the record starts */
    size_t bytes; /* bytes of text the record spans, with its line end */
} csv_record;

typedef struct csv_fixup {
    size_t cell; /* index of a cell whose text lives in scratch */
    size_t off;  /* its offset there */
} csv_fixup;

typedef struct csv_reader {
    const char *pos, *end; /* unread text */
    size_t line;           /* physical line of pos */
    csv_cell *cells;
    size_t cells_cap;
    dynbuf scratch; /* unescaped text of this record's cells with doubled quotes; capped at
                       the text's length */
    csv_fixup *fix; /* scratch offsets, turned into pointers once the record is complete */
    size_t fix_len, fix_cap;
} csv_reader;

/* Starts reading len bytes of text (borrowed; need not be NUL-terminated). */
void csv_reader_init(csv_reader *r, const char *text, size_t len);

/* Reads the next record into *rec: returns 1 when a record was read, 0 at the end of the text,
 * or a negative errno (-EBADMSG malformed quoting, -E2BIG too many cells, -ENOMEM) with a
 * message naming the line in err. */
int csv_reader_next(csv_reader *r, csv_record *rec, char *err);

/* Releases the reader's arrays (not the text); accepts a zeroed or freed reader. */
void csv_reader_free(csv_reader *r);

/* Strips spaces and tabs from both ends of *p / *len. */
void csv_trim(const char **p, size_t *len);

/* Parses a decimal number that may be surrounded by spaces or tabs: an optional sign, digits
 * with an optional point, and an optional exponent. Returns 0 and writes *out, -EINVAL when the
 * text is empty or not such a number (inf, nan, hex and trailing text are refused), or -ERANGE
 * when it overflows a double. csv_number() is the same, inlined for the common case. */
int csv_number_general(const char *p, size_t len, double *out);

/* 10^0 .. 10^22, each exact in a double. */
extern const double csv_pow10[23];

/* csv_number_general() with a fast path, inlined where cells are converted: an optional '-',
 * at most 15 digits with an optional point, nothing around. 15 digits fit a double's mantissa
 * exactly and 10^k is exact, so one division rounds correctly. */
static inline int csv_number(const char *p, size_t len, double *out)
{
    const char *s = p, *e = p + len;
    int neg = s < e && *s == '-';
    s += neg;
    const char *d = s;
    uint64_t m = 0;
    while (s < e && (unsigned)(*s - '0') < 10)
        m = m * 10 + (unsigned)(*s++ - '0');
    size_t digits = (size_t)(s - d), frac = 0;
    if (s < e && *s == '.') {
        const char *f = ++s;
        while (s < e && (unsigned)(*s - '0') < 10)
            m = m * 10 + (unsigned)(*s++ - '0');
        frac = (size_t)(s - f);
        digits += frac;
    }
    if (s != e || digits == 0 || digits > 15)
        return csv_number_general(p, len, out);
    double v = (double)m;
    if (frac)
        v /= csv_pow10[frac];
    *out = neg ? -v : v;
    return 0;
}

#endif
