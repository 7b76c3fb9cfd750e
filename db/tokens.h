/* db/tokens: the tokens table — API credentials, each with a role, stored only as the SHA-256
 * of the secret the holder sends (Authorization: Bearer <secret>).
 *
 * A secret is "ty_" followed by 40 hex digits (160 random bits, db_token_secret_new); its hash
 * is what the table keeps and what a lookup matches, so the database never holds a usable
 * credential. Revoking sets revoked_at and keeps the row: jobs keep naming their owner's token
 * id, and the listing shows who had access when. */
#ifndef TRAINYARD_DB_TOKENS_H
#define TRAINYARD_DB_TOKENS_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"

#define DB_TOKEN_SECRET_LEN 43      /* "ty_" + 40 hex digits */
#define DB_TOKEN_HASH_LEN   64      /* hex SHA-256 */
#define DB_TOKEN_CAP_MAX    1000000 /* the largest max_running or max_queued a token may have */

/* 0 is no role, so a zeroed caller or token has none; the table stores the names, not these
 * numbers. */
enum db_role {
    DB_ROLE_NONE = 0,
    DB_ROLE_ADMIN,
    DB_ROLE_USER,
    DB_ROLE_WORKER,
    DB_ROLE_METRICS,
    DB_N_ROLES
};

typedef struct db_token {
    char id[DB_ID_LEN + 1];
    char name[DB_NAME_MAX + 1];
    int role; /* enum db_role */
    int64_t created_at;
    int64_t revoked_at; /* 0: active */
    int scripts;        /* 1: may submit script jobs (a user token's right; admins always may) */
    int max_running;    /* its jobs leased at once, at most; 0: no cap */
    int max_queued;     /* its jobs queued or running at once, at most (more submits are
                           refused); 0: no cap */
} db_token;

typedef int (*db_token_fn)(void *ctx, const db_token *t);

/* "admin", "user", "worker", "metrics"; NULL for DB_ROLE_NONE and out of range. */
const char *db_role_name(int role);
/* The enum db_role of a name (never DB_ROLE_NONE); -1 when unknown. */
int db_role_parse(const char *s);

/* A new random secret (NUL-terminated) and its hash. */
int db_token_secret_new(char secret[DB_TOKEN_SECRET_LEN + 1], char hash[DB_TOKEN_HASH_LEN + 1],
                        char *err);
/* The hash a secret is stored under. */
void db_token_hash(const char *secret, char hash[DB_TOKEN_HASH_LEN + 1]);

/* Makes a new active token (scripts: the right to submit script jobs): its secret (shown once,
 * never stored) into secret, its row into *out. */
int db_token_create(db *d, const char *name, int role, int scripts, int64_t now, db_token *out,
                    char secret[DB_TOKEN_SECRET_LEN + 1], char *err);
/* db_token_create with the caps of spec (max_running, max_queued; 0: none) besides its name,
 * role and scripts right. Caps are set only here: leasing and submits read them from the row. */
int db_token_create_capped(db *d, const db_token *spec, int64_t now, db_token *out,
                           char secret[DB_TOKEN_SECRET_LEN + 1], char *err);
/* Inserts a new active token with spec's name, role, scripts right and caps, whose secret
 * hashes to hash; fills *out (may be NULL). */
int db_token_insert(db *d, const db_token *spec, const char *hash, int64_t now, db_token *out,
                    char *err);
/* The active token whose secret hashes to hash; -ENOENT when none (unknown or revoked). */
int db_token_find_hash(db *d, const char *hash, db_token *out, char *err);
/* The token with id, active or not; -ENOENT when none. */
int db_token_get(db *d, const char *id, db_token *out, char *err);
/* Every token, oldest first; revoked ones too when with_revoked. */
int db_token_list(db *d, int with_revoked, db_token_fn fn, void *ctx, char *err);
/* Revokes the active token id at now; -ENOENT when no active token has that id. */
int db_token_revoke(db *d, const char *id, int64_t now, char *err);
/* Revokes every active token named name with role; returns how many. */
int db_token_revoke_named(db *d, const char *name, int role, int64_t now, char *err);
/* How many active tokens have role. */
int db_token_count(db *d, int role, int64_t *out, char *err);

#endif
