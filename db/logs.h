/* db/logs: the logs table — a job's log lines, numbered from 1, bounded per job.
 *
 * A job keeps its first DB_LOG_MAX_LINES lines; the next one is replaced by a marker line
 * saying that later lines were dropped, and every line after that is dropped. The jobs row
 * counts the lines stored (db_job.log_lines), which is where an append starts; the marker
 * counts as a line. Lines are cut to DB_LOG_LINE_MAX bytes (at a UTF-8 boundary) and carriage
 * returns and newlines inside a line become spaces, so one stored line is one output line. */
#ifndef TRAINYARD_DB_LOGS_H
#define TRAINYARD_DB_LOGS_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"

#define DB_LOG_MAX_LINES 100000
#define DB_LOG_LINE_MAX  4096

/* Called per line (text is NUL-terminated, len bytes); valid during the call only. A negative
 * return stops the walk. */
typedef int (*db_log_fn)(void *ctx, int line, int64_t at, const char *text, size_t len);

/* Appends n lines to job_seq whose count of stored lines is *log_lines, applying the cap;
 * updates *log_lines (the caller stores it in the jobs row in the same transaction). */
int db_log_append(db *d, int64_t job_seq, int *log_lines, int64_t at, const char *const *lines,
                  size_t n, char *err);
/* At most limit lines of job_seq numbered after after_line, in order. */
int db_log_list(db *d, int64_t job_seq, int after_line, int limit, db_log_fn fn, void *ctx,
                char *err);

#endif
