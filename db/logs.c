/* db/logs: appending and reading log lines with the per-job cap (see logs.h). */
#include "db/logs.h"

#include <stdio.h>
#include <string.h>

static const char SQL_LOG_APPEND[] =
    "INSERT INTO logs (job_seq, line, at, text) VALUES (?, ?, ?, ?)";

#define DB_STR_(x) #x
#define DB_STR(x)  DB_STR_(x)

static const char DB_LOG_MARKER[] = "[trainyard] this job logged more than " DB_STR(
    DB_LOG_MAX_LINES) " lines; later lines are not kept";

/* Copies text into buf (DB_LOG_LINE_MAX + 1 bytes) as one clean line; returns its length. */
static size_t db_log_clean(const char *text, char *buf)
{
    size_t n = strlen(text);
    if (n > DB_LOG_LINE_MAX) {
        n = DB_LOG_LINE_MAX;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--; /* text[n] continues a character: cut before the character starts */
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
    buf[n] = '\0';
    return n;
}

static int db_log_insert(db *d, sqlite3_stmt *st, int64_t job_seq, int line, int64_t at,
                         const char *text, size_t len, char *err)
{
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, line);
    sqlite3_bind_int64(st, 3, at);
    sqlite3_bind_text(st, 4, text, (int)len, SQLITE_STATIC);
    int src = sqlite3_step(st);
    return src == SQLITE_DONE ? 0 : db_fail(d, src, err);
}

int db_log_append(db *d, int64_t job_seq, int *log_lines, int64_t at, const char *const *lines,
                  size_t n, char *err)
{
    int count = *log_lines;
    if (count > DB_LOG_MAX_LINES || n == 0)
        return 0; /* already capped, or nothing to add */
    char buf[DB_LOG_LINE_MAX + 1];
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_LOG_APPEND, &st, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && count <= DB_LOG_MAX_LINES; i++) {
        const char *text = DB_LOG_MARKER;
        size_t len = sizeof DB_LOG_MARKER - 1;
        if (count < DB_LOG_MAX_LINES) {
            len = db_log_clean(lines[i], buf);
            text = buf;
        }
        rc = db_log_insert(d, st, job_seq, count + 1, at, text, len, err);
        if (rc < 0)
            goto out;
        count++;
    }
    *log_lines = count;
out:
    db_stmt_done(st);
    return rc;
}

static const char SQL_LOG_LIST[] = "SELECT line, at, text FROM logs WHERE job_seq = ? AND line > ?"
                                   " ORDER BY line LIMIT ?";

/* The user's callback and context for db_log_row. */
typedef struct db_log_walk {
    db_log_fn fn;
    void *ctx;
} db_log_walk;

/* db_rows() adapter: hands one log row to the user's callback. */
static int db_log_row(void *ctx, sqlite3_stmt *st)
{
    db_log_walk *w = ctx;
    const char *text = (const char *)sqlite3_column_text(st, 2);
    size_t len = (size_t)sqlite3_column_bytes(st, 2);
    return w->fn(w->ctx, sqlite3_column_int(st, 0), db_col_int(st, 1), text ? text : "", len);
}

int db_log_list(db *d, int64_t job_seq, int after_line, int limit, db_log_fn fn, void *ctx,
                char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_LOG_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, after_line);
    sqlite3_bind_int(st, 3, limit);
    db_log_walk w = {fn, ctx};
    return db_rows(d, st, db_log_row, &w, err);
}
