/* db/tokens: token rows (see tokens.h). */
#include "db/tokens.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/sha256.h"

#define DB_TOKEN_COLS "id, name, role, created_at, revoked_at, scripts, max_running, max_queued"

static const char SQL_TOKEN_INSERT[] =
    "INSERT INTO tokens (id, name, role, hash, created_at, scripts, max_running, max_queued)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_TOKEN_FIND[] =
    "SELECT " DB_TOKEN_COLS " FROM tokens WHERE hash = ? AND revoked_at IS NULL";
static const char SQL_TOKEN_GET[] = "SELECT " DB_TOKEN_COLS " FROM tokens WHERE id = ?";
static const char SQL_TOKEN_LIST[] =
    "SELECT " DB_TOKEN_COLS " FROM tokens WHERE ?1 OR revoked_at IS NULL ORDER BY created_at, id";
static const char SQL_TOKEN_REVOKE[] =
    "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL";
static const char SQL_TOKEN_REVOKE_NAMED[] =
    "UPDATE tokens SET revoked_at = ?3 WHERE name = ?1 AND role = ?2 AND revoked_at IS NULL";
static const char SQL_TOKEN_COUNT[] =
    "SELECT count(*) FROM tokens WHERE role = ? AND revoked_at IS NULL";

static const char *const db_role_names[DB_N_ROLES] = {NULL, "admin", "user", "worker", "metrics"};

const char *db_role_name(int role)
{
    return role >= 0 && role < DB_N_ROLES ? db_role_names[role] : NULL;
}

int db_role_parse(const char *s)
{
    for (int i = DB_ROLE_NONE + 1; s && i < DB_N_ROLES; i++)
        if (strcmp(s, db_role_names[i]) == 0)
            return i;
    return -1;
}

void db_token_hash(const char *secret, char hash[DB_TOKEN_HASH_LEN + 1])
{
    sha256_ctx c;
    uint8_t digest[32];
    sha256_init(&c);
    sha256_update(&c, secret, strlen(secret));
    sha256_final(&c, digest);
    sha256_hex(digest, hash);
}

int db_token_secret_new(char secret[DB_TOKEN_SECRET_LEN + 1], char hash[DB_TOKEN_HASH_LEN + 1],
                        char *err)
{
    memcpy(secret, "ty_", 3);
    int rc = db_random_hex(secret + 3, (DB_TOKEN_SECRET_LEN - 3) / 2, err);
    if (rc < 0)
        return rc;
    db_token_hash(secret, hash);
    return 0;
}

static void db_token_read(sqlite3_stmt *st, db_token *out)
{
    memset(out, 0, sizeof *out);
    db_col_copy(st, 0, out->id, sizeof out->id);
    db_col_copy(st, 1, out->name, sizeof out->name);
    out->role = db_role_parse((const char *)sqlite3_column_text(st, 2));
    out->created_at = db_col_int(st, 3);
    out->revoked_at = db_col_int(st, 4);
    out->scripts = sqlite3_column_int(st, 5);
    out->max_running = sqlite3_column_int(st, 6);
    out->max_queued = sqlite3_column_int(st, 7);
}

/* Steps st expecting at most one row; -ENOENT with missing as the sentence when none. */
static int db_token_one(db *d, sqlite3_stmt *st, db_token *out, const char *missing, char *err)
{
    int src = sqlite3_step(st);
    int rc = 0;
    if (src == SQLITE_ROW)
        db_token_read(st, out);
    else if (src == SQLITE_DONE)
        rc = err_set(err, -ENOENT, "%s", missing);
    else
        rc = db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

int db_token_insert(db *d, const db_token *spec, const char *hash, int64_t now, db_token *out,
                    char *err)
{
    db_token t;
    memset(&t, 0, sizeof t);
    int rc = db_id_new(t.id, err);
    if (rc < 0)
        return rc;
    snprintf(t.name, sizeof t.name, "%s", spec->name);
    t.role = spec->role;
    t.scripts = spec->scripts != 0;
    t.max_running = spec->max_running > 0 ? spec->max_running : 0;
    t.max_queued = spec->max_queued > 0 ? spec->max_queued : 0;
    t.created_at = now;
    sqlite3_stmt *st = NULL;
    rc = db_stmt(d, SQL_TOKEN_INSERT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, t.id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, t.name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, db_role_name(t.role), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now);
    sqlite3_bind_int(st, 6, t.scripts);
    sqlite3_bind_int(st, 7, t.max_running);
    sqlite3_bind_int(st, 8, t.max_queued);
    rc = db_write(d, st, err);
    if (rc < 0)
        return rc;
    if (out)
        *out = t;
    return 0;
}

int db_token_create_capped(db *d, const db_token *spec, int64_t now, db_token *out,
                           char secret[DB_TOKEN_SECRET_LEN + 1], char *err)
{
    char made[DB_TOKEN_SECRET_LEN + 1], hash[DB_TOKEN_HASH_LEN + 1];
    int rc = db_token_secret_new(made, hash, err);
    if (rc < 0)
        return rc;
    rc = db_token_insert(d, spec, hash, now, out, err);
    if (rc < 0)
        return rc;
    memcpy(secret, made, sizeof made);
    return 0;
}

int db_token_create(db *d, const char *name, int role, int scripts, int64_t now, db_token *out,
                    char secret[DB_TOKEN_SECRET_LEN + 1], char *err)
{
    db_token spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.name, sizeof spec.name, "%s", name);
    spec.role = role;
    spec.scripts = scripts;
    return db_token_create_capped(d, &spec, now, out, secret, err);
}

int db_token_find_hash(db *d, const char *hash, db_token *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_FIND, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    return db_token_one(d, st, out, "the token is not valid: unknown or revoked", err);
}

int db_token_get(db *d, const char *id, db_token *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    return db_token_one(d, st, out, "no such token", err);
}

typedef struct db_token_walk {
    db_token_fn fn;
    void *ctx;
} db_token_walk;

static int db_token_row(void *ctx, sqlite3_stmt *st)
{
    db_token_walk *w = ctx;
    db_token t;
    db_token_read(st, &t);
    return w->fn(w->ctx, &t);
}

int db_token_list(db *d, int with_revoked, db_token_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, with_revoked != 0);
    db_token_walk w = {fn, ctx};
    return db_rows(d, st, db_token_row, &w, err);
}

int db_token_revoke(db *d, const char *id, int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_REVOKE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    rc = db_write(d, st, err);
    if (rc == 0)
        return err_set(err, -ENOENT, "no active token has the id %s", id);
    return rc < 0 ? rc : 0;
}

int db_token_revoke_named(db *d, const char *name, int role, int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_REVOKE_NAMED, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, db_role_name(role), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now);
    return db_write(d, st, err);
}

int db_token_count(db *d, int role, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_TOKEN_COUNT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, db_role_name(role), -1, SQLITE_STATIC);
    return db_count(d, st, out, err);
}
