/* db: the connection, its statement cache, transactions and error codes (see db.h).
 *
 * The statement cache is an open-addressed table of DB_STMT_SLOTS entries keyed by the SQL
 * text's address (hashed), filled on first use and never evicted: the program has a fixed set
 * of queries, well under the table's size. When it does fill up, a statement is still prepared
 * and cached in the overflow list; nothing fails for lack of room.
 *
 * Write transactions of this process take db_write_lock around BEGIN IMMEDIATE ... COMMIT, so
 * they queue in FIFO-ish order on a mutex instead of polling SQLite's lock (see below).
 *
 * Invariants: d->in_tx is 1 exactly between a successful db_begin() and db_commit() or
 * db_rollback(), and then this thread holds db_write_lock; a statement handed out by db_stmt()
 * has been reset and unbound. */
#include "db/db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "util/secret.h"

#define DB_STMT_SLOTS 128

typedef struct db_slot {
    const char *sql;
    sqlite3_stmt *st;
} db_slot;

typedef struct db_extra {
    db_slot slot;
    struct db_extra *next;
} db_extra;

struct db {
    sqlite3 *conn;
    int in_tx;
    db_slot slots[DB_STMT_SLOTS];
    db_extra *extra; /* statements past the table's capacity */
};

/* Writers of this process queue here rather than in SQLite's busy handler, which sleeps in
 * steps of up to 100 ms whatever the holder does: with it, a submit waiting behind another
 * starts the moment the other commits. (Other processes still meet the busy timeout.) */
static pthread_mutex_t db_write_lock = PTHREAD_MUTEX_INITIALIZER;

static const char DB_SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char DB_SQL_COMMIT[] = "COMMIT";
static const char DB_SQL_ROLLBACK[] = "ROLLBACK";

int db_code(int sqlite_rc)
{
    switch (sqlite_rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EAGAIN;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_CONSTRAINT:
        return -EEXIST;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_CANTOPEN:
        return -ENOENT;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    default:
        return -EIO;
    }
}

int db_fail(db *d, int sqlite_rc, char *err)
{
    const char *msg = d && d->conn ? sqlite3_errmsg(d->conn) : sqlite3_errstr(sqlite_rc);
    return err_set(err, db_code(sqlite_rc) ? db_code(sqlite_rc) : -EIO, "database: %s", msg);
}

int db_changes(db *d)
{
    return sqlite3_changes(d->conn);
}

sqlite3 *db_sqlite(db *d)
{
    return d->conn;
}

int db_exec(db *d, const char *sql, char *err)
{
    char *msg = NULL;
    int src = sqlite3_exec(d->conn, sql, NULL, NULL, &msg);
    if (src == SQLITE_OK)
        return 0;
    int rc = err_set(err, db_code(src) ? db_code(src) : -EIO, "database: %s",
                     msg ? msg : sqlite3_errstr(src));
    sqlite3_free(msg);
    return rc;
}

/* ---- statements ------------------------------------------------------------------------- */

static size_t db_slot_hash(const char *sql)
{
    uintptr_t h = (uintptr_t)sql;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) % DB_STMT_SLOTS;
}

/* The slot that holds sql, or the empty slot where it belongs, or NULL when the table is full
 * and sql is not in it. */
static db_slot *db_slot_find(db *d, const char *sql)
{
    size_t h = db_slot_hash(sql);
    for (size_t i = 0; i < DB_STMT_SLOTS; i++) {
        db_slot *s = &d->slots[(h + i) % DB_STMT_SLOTS];
        if (s->sql == sql || s->sql == NULL)
            return s;
    }
    return NULL;
}

int db_stmt(db *d, const char *sql, sqlite3_stmt **out, char *err)
{
    db_slot *s = db_slot_find(d, sql);
    db_extra *x = NULL;
    if (!s) {
        for (x = d->extra; x; x = x->next) {
            if (x->slot.sql == sql)
                break;
        }
        if (!x) {
            x = calloc(1, sizeof *x);
            if (!x)
                return err_set(err, -ENOMEM, "out of memory");
            x->next = d->extra;
            d->extra = x;
        }
        s = &x->slot;
    }
    if (!s->st) {
        sqlite3_stmt *st = NULL;
        int src = sqlite3_prepare_v3(d->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (src != SQLITE_OK)
            return db_fail(d, src, err);
        s->sql = sql;
        s->st = st;
    }
    sqlite3_reset(s->st);
    sqlite3_clear_bindings(s->st);
    *out = s->st;
    return 0;
}

void db_stmt_done(sqlite3_stmt *st)
{
    if (st)
        sqlite3_reset(st);
}

int db_run(db *d, const char *sql, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, sql, &st, err);
    if (rc < 0)
        return rc;
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

int db_write(db *d, sqlite3_stmt *st, char *err)
{
    int src = sqlite3_step(st);
    int rc = src == SQLITE_DONE ? db_changes(d) : db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

int db_count(db *d, sqlite3_stmt *st, int64_t *out, char *err)
{
    int rc = 0, src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        rc = db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

int db_rows(db *d, sqlite3_stmt *st, int (*row)(void *ctx, sqlite3_stmt *st), void *ctx, char *err)
{
    int rc = 0;
    for (;;) {
        int src = sqlite3_step(st);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = db_fail(d, src, err);
            break;
        }
        rc = row(ctx, st);
        if (rc < 0)
            break;
    }
    db_stmt_done(st);
    return rc;
}

int db_row_int(void *ctx, sqlite3_stmt *st)
{
    *(int *)ctx = sqlite3_column_int(st, 0);
    return 0;
}

/* ---- transactions ----------------------------------------------------------------------- */

int db_begin(db *d, char *err)
{
    pthread_mutex_lock(&db_write_lock);
    int rc = db_run(d, DB_SQL_BEGIN, err);
    if (rc < 0) {
        pthread_mutex_unlock(&db_write_lock);
        return rc;
    }
    d->in_tx = 1;
    return 0;
}

int db_commit(db *d, char *err)
{
    int rc = db_run(d, DB_SQL_COMMIT, err);
    if (rc < 0) {
        db_rollback(d);
        return rc;
    }
    if (d->in_tx)
        pthread_mutex_unlock(&db_write_lock);
    d->in_tx = 0;
    return 0;
}

void db_rollback(db *d)
{
    if (!sqlite3_get_autocommit(d->conn))
        db_run(d, DB_SQL_ROLLBACK, NULL);
    if (d->in_tx)
        pthread_mutex_unlock(&db_write_lock);
    d->in_tx = 0;
}

/* ---- open and close --------------------------------------------------------------------- */

int db_version(db *d, int *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(d->conn, "PRAGMA user_version", -1, &st, NULL);
    if (src != SQLITE_OK)
        return db_fail(d, src, err);
    src = sqlite3_step(st);
    int rc = src == SQLITE_ROW ? 0 : db_fail(d, src, err);
    if (rc == 0)
        *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc;
}

/* Process-wide SQLite settings, once, before the first connection: no memory statistics, which
 * SQLite otherwise keeps under one global mutex that every thread's connection would take on
 * each allocation. */
static void db_configure(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int db_open(const char *path, db **out, char *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, db_configure);
    int rc = 0;
    db *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(err, -ENOMEM, "out of memory");
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int src = sqlite3_open_v2(path, &d->conn, flags, NULL);
    if (src != SQLITE_OK) {
        rc = err_set(err, db_code(src) ? db_code(src) : -EIO, "cannot open the database %s: %s",
                     path, d->conn ? sqlite3_errmsg(d->conn) : sqlite3_errstr(src));
        goto out;
    }
    sqlite3_extended_result_codes(d->conn, 1);
    sqlite3_busy_timeout(d->conn, DB_BUSY_TIMEOUT_MS);
    /* journal_mode and foreign_keys cannot change inside a transaction: set them first. When
     * several connections open a new file at once, switching it to WAL can answer SQLITE_BUSY
     * without waiting in the busy handler; that case is tried again for the busy timeout. */
    for (int waited_ms = 0;; waited_ms += 10) {
        rc = db_exec(d,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
                     "PRAGMA temp_store=MEMORY;",
                     err);
        if (rc == 0)
            rc = db_migrate(d, err);
        if (rc != -EAGAIN || waited_ms >= DB_BUSY_TIMEOUT_MS)
            break;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
out:
    if (rc < 0) {
        db_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

void db_close(db *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < DB_STMT_SLOTS; i++)
        sqlite3_finalize(d->slots[i].st);
    while (d->extra) {
        db_extra *next = d->extra->next;
        sqlite3_finalize(d->extra->slot.st);
        free(d->extra);
        d->extra = next;
    }
    sqlite3_close_v2(d->conn);
    free(d);
}

/* ---- ids and columns -------------------------------------------------------------------- */

int db_random_hex(char *out, size_t n, char *err)
{
    uint8_t raw[64];
    if (n > sizeof raw)
        return err_set(err, -EINVAL, "at most %zu random bytes at once", sizeof raw);
    int rc = secret_random(raw, n, err);
    if (rc < 0)
        return rc;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * n] = '\0';
    return 0;
}

int db_id_new(char out[DB_ID_LEN + 1], char *err)
{
    return db_random_hex(out, DB_ID_LEN / 2, err);
}

void db_col_copy(sqlite3_stmt *st, int col, char *buf, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t) {
        buf[0] = '\0';
        return;
    }
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, t, n);
    buf[n] = '\0';
}

int db_col_dup(sqlite3_stmt *st, int col, char **out)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t) {
        if (sqlite3_column_type(st, col) != SQLITE_NULL)
            return -ENOMEM; /* the conversion to text failed */
        *out = NULL;
        return 0;
    }
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    char *s = malloc(n + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, t, n);
    s[n] = '\0';
    *out = s;
    return 0;
}

double db_col_real(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return NAN;
    return sqlite3_column_double(st, col);
}

int64_t db_col_int(sqlite3_stmt *st, int col)
{
    return sqlite3_column_int64(st, col);
}

int db_bind_opt_text(sqlite3_stmt *st, int idx, const char *s)
{
    if (!s || !*s)
        return sqlite3_bind_null(st, idx);
    return sqlite3_bind_text(st, idx, s, -1, SQLITE_STATIC);
}

int db_bind_opt_time(sqlite3_stmt *st, int idx, int64_t v)
{
    if (v == 0)
        return sqlite3_bind_null(st, idx);
    return sqlite3_bind_int64(st, idx, v);
}
