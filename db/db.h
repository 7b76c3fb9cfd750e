/* db: trainyard's SQLite storage — one connection, its cached statements, transactions, and the
 * schema with its migrations.
 *
 * A db is one SQLite connection used by one thread at a time (opened NOMUTEX; `serve` gives
 * every HTTP thread its own, see api/app.h). db_open() sets WAL mode, synchronous=FULL,
 * foreign_keys=ON and a busy timeout, then brings the schema up to date.
 *
 * Durability: with WAL and synchronous=FULL a COMMIT returns only after the transaction's WAL
 * frames were fsync'ed, so a job whose submit was acknowledged survives kill -9 of the server
 * and a power cut. NORMAL would survive kill -9 only (the frames sit in the page cache until a
 * checkpoint); the submit benchmark (bench/bench_submit.c) shows FULL keeps well above the
 * design's 2,000 submits per second, so FULL it is.
 *
 * Statements are prepared on first use and kept for the connection's life, keyed by the address
 * of their SQL text: every query module keeps its SQL in `static const char` arrays and passes
 * them to db_stmt(), which hands the statement out reset with no bindings. The caller steps it
 * and calls db_stmt_done() on every path (a statement left mid-step would hold a read
 * transaction open and pin an old snapshot).
 *
 * Schema: PRAGMA user_version counts the migrations applied (db/schema.c). db_open() applies the
 * missing ones in order inside one BEGIN IMMEDIATE transaction, so a database is at one version
 * or the one before, never in between; a database from a newer trainyard is refused.
 *
 * Bindings: text is bound SQLITE_STATIC (borrowed; the caller's string outlives the step, and
 * db_stmt() clears the bindings before the statement is handed out again), never
 * SQLITE_TRANSIENT: SQLite's copy can fail for lack of memory, and then the parameter stays NULL
 * and the statement runs anyway, so a lookup by id finds nothing and an insert breaks NOT NULL.
 *
 * Errors: SQLite result codes become negative errno codes (db_code): BUSY and LOCKED → -EAGAIN,
 * FULL → -ENOSPC, CONSTRAINT → -EEXIST, NOMEM → -ENOMEM, CANTOPEN → -ENOENT, the rest → -EIO.
 * Times in the database are milliseconds since the Unix epoch. */
#ifndef TRAINYARD_DB_DB_H
#define TRAINYARD_DB_DB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "util/err.h"

#define DB_ID_LEN          32   /* public ids: 128 random bits as lowercase hex */
#define DB_BUSY_TIMEOUT_MS 5000 /* how long a writer waits for another's transaction */

typedef struct db db;

/* Opens (creating if needed) the database at path and migrates it; *out is freed by db_close. */
int db_open(const char *path, db **out, char *err);
/* Finalises the cached statements and closes the connection; accepts NULL. */
void db_close(db *d);
/* The SQLite connection (borrowed). */
sqlite3 *db_sqlite(db *d);

/* The cached statement for sql (a static string: its address is the key), reset and unbound. */
int db_stmt(db *d, const char *sql, sqlite3_stmt **out, char *err);
/* Resets a statement from db_stmt() so it holds no locks; accepts NULL. */
void db_stmt_done(sqlite3_stmt *st);
/* Runs the cached statement of sql (static, as for db_stmt) that returns no rows. */
int db_run(db *d, const char *sql, char *err);
/* Steps bound st, a write with no rows: the rows it changed or db_fail(); st is released. */
int db_write(db *d, sqlite3_stmt *st, char *err);
/* Steps bound st, a query of one integer (a count), into *out; st is released. */
int db_count(db *d, sqlite3_stmt *st, int64_t *out, char *err);
/* Steps bound st calling row(ctx, st) per row (a negative return stops and is returned, else the
 * last one is), step errors become db_fail(); st is always released with db_stmt_done(). */
int db_rows(db *d, sqlite3_stmt *st, int (*row)(void *ctx, sqlite3_stmt *st), void *ctx, char *err);
/* A db_rows() row callback for a one-integer query: stores column 0 in *(int *)ctx. */
int db_row_int(void *ctx, sqlite3_stmt *st);

/* BEGIN IMMEDIATE: takes the write lock now (first this process's writer mutex, then SQLite's
 * lock, waiting up to the busy timeout for other processes). */
int db_begin(db *d, char *err);
/* COMMIT; on failure the transaction is rolled back. */
int db_commit(db *d, char *err);
/* ROLLBACK when a transaction is open; never fails. */
void db_rollback(db *d);
/* Runs SQL text without results (several statements allowed). */
int db_exec(db *d, const char *sql, char *err);

/* The errno-style code of an SQLite result code. */
int db_code(int sqlite_rc);
/* Writes "database: <SQLite's message>" into err and returns db_code(sqlite_rc). */
int db_fail(db *d, int sqlite_rc, char *err);
/* Rows changed by the last INSERT, UPDATE or DELETE on d. */
int db_changes(db *d);

/* The schema version of the open database (PRAGMA user_version). */
int db_version(db *d, int *out, char *err);
/* The schema version this build creates (the number of migrations it knows). */
int db_schema_latest(void);
/* Applies the missing migrations in one transaction (db/schema.c; db_open calls it). */
int db_migrate(db *d, char *err);

/* A new public id: DB_ID_LEN lowercase hex digits of getrandom() and a NUL. */
int db_id_new(char out[DB_ID_LEN + 1], char *err);
/* n random bytes from getrandom() as 2n lowercase hex digits and a NUL into out. */
int db_random_hex(char *out, size_t n, char *err);

/* ---- column and binding helpers for the query modules -------------------------------------- */

/* Copies a text column into buf (cut to cap-1 bytes; "" for NULL). */
void db_col_copy(sqlite3_stmt *st, int col, char *buf, size_t cap);
/* A malloc'ed copy of a text column into *out, or NULL for a NULL column; -ENOMEM on failure. */
int db_col_dup(sqlite3_stmt *st, int col, char **out);
/* A REAL column, NAN for NULL. */
double db_col_real(sqlite3_stmt *st, int col);
/* An INTEGER column, 0 for NULL. */
int64_t db_col_int(sqlite3_stmt *st, int col);
/* Binds text (borrowed, SQLITE_STATIC), or NULL when s is NULL or empty. */
int db_bind_opt_text(sqlite3_stmt *st, int idx, const char *s);
/* Binds an integer, or NULL when v is 0. */
int db_bind_opt_time(sqlite3_stmt *st, int idx, int64_t v);

#endif
