/* metrics_csv: a job's metrics.csv, the one writer of it (the trainer's, and a script job's
 * written from the server's metrics): a header of column names, then one row per epoch.
 *
 * The number format: an integer as an integer ("3"), a real as the shortest decimal that reads
 * back to the same double (util/json_out.h's json_out_real: "0.95", "1.0", "1e-7",
 * "0.6931471824645996"), and an empty cell for a value the row does not have (JSON null, a
 * missing key; the trainer's NaN reaches here as null). These are the digits the API's
 * GET /jobs/{id}/metrics gives for the same epochs, so the file and the API agree exactly and a
 * reader's float() gets the number back bit for bit.
 *
 * Every row is flushed as it is written: a reader, or a process killed mid-run, sees whole rows
 * only. A failed write is remembered and reported by metrics_csv_close(). */
#ifndef TRAINYARD_TRAIN_METRICS_CSV_H
#define TRAINYARD_TRAIN_METRICS_CSV_H

#include <jansson.h>
#include <stddef.h>

#define METRICS_CSV_CELL_MAX 32 /* bytes of metrics_csv_cell's text, NUL included */

typedef struct metrics_csv metrics_csv;

/* Creates (or truncates) path and writes the header, names[0..n) joined by commas (names are
 * written as they are: no quoting). *out is the caller's, closed by metrics_csv_close. */
int metrics_csv_open(const char *path, const char *const *names, size_t n, metrics_csv **out,
                     char *err);
/* Appends one row: for each column, the cell of row's member of that name (row a JSON object;
 * borrowed). */
void metrics_csv_row(metrics_csv *w, const json_t *row);
/* Closes the file and frees w; 0, or -EIO with a message when any write failed. Accepts NULL. */
int metrics_csv_close(metrics_csv *w, char *err);
/* The text of one cell for v (NULL: empty), in the format above; its length. */
int metrics_csv_cell(const json_t *v, char out[METRICS_CSV_CELL_MAX]);

#endif
