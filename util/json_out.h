/* json_out: JSON text from jansson values, with every real printed as the shortest decimal
 * that reads back (strtod) to the same double: 0.9 and 1e-7 rather than jansson's "%.17g"
 * 0.90000000000000002 and 9.9999999999999995e-8.
 *
 * The functions mirror json_dumps, json_dumpf and json_dump_file and take the same flags:
 * JSON_INDENT(n), JSON_COMPACT, JSON_SORT_KEYS (else insertion order, as jansson 2.14 keeps
 * it), JSON_ENCODE_ANY, JSON_ENSURE_ASCII, JSON_ESCAPE_SLASH, and JSON_REAL_PRECISION(p), which
 * caps a real at p significant digits (the shortest form of at most p that reads back, else
 * p digits). JSON_EMBED is not supported (-EINVAL / NULL). Everything but reals is written
 * byte for byte as jansson writes it: the same separators, indentation and string escapes
 * (\" \\ \b \f \n \r \t, other control characters as \u00XX with upper-case hex, UTF-8 as is
 * unless JSON_ENSURE_ASCII). A real always shows a '.' or an exponent ("1.0", "1e21"), so it
 * reads back as a real. jansson holds no NaN or infinity (json_real refuses them); should one
 * appear, the dump fails rather than write invalid JSON. */
#ifndef TRAINYARD_UTIL_JSON_OUT_H
#define TRAINYARD_UTIL_JSON_OUT_H

#include <jansson.h>
#include <stdio.h>

#define JSON_OUT_REAL_MAX 32 /* bytes of json_out_real's text, NUL included */

/* The text of v as json_dumps would give it but for the reals; malloc'd (the caller frees),
 * NULL when out of memory, for a non-container without JSON_ENCODE_ANY, or a bad value. */
char *json_out_dumps(const json_t *v, size_t flags);
/* Writes that text to f; 0, or -EINVAL / -ENOMEM / -EIO. */
int json_out_dumpf(const json_t *v, FILE *f, size_t flags);
/* Writes that text to the file at path (created or truncated); 0 or a negative errno. */
int json_out_dump_file(const json_t *v, const char *path, size_t flags);

/* The shortest text of d that strtod reads back to d's exact bits, as a JSON real, capped at
 * precision significant digits (0: 17); returns its length, or -EDOM for NaN or infinity. */
int json_out_real(double d, int precision, char out[JSON_OUT_REAL_MAX]);
/* The double that the shortest decimal reading back to f (through strtof) denotes: a float
 * stored in a json_real this way prints as "0.1" rather than "0.10000000149011612". */
double json_out_float(float f);
/* The same shortest digits of f as text in %g's notation ("0.001", "1e-05", "1", "0.99"; NaN
 * and infinity as %g writes them), '.' the decimal point whatever the locale: a float written
 * into code or prose (model/export.c's PyTorch modules). Returns its length. */
int json_out_float_text(float f, char out[JSON_OUT_REAL_MAX]);

#endif
