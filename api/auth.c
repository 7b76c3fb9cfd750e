/* auth: who is calling (Authorization: Bearer), what their role lets them call, and the token
 * endpoints POST /tokens, GET /tokens, DELETE /tokens/{id}.
 *
 * api_authorize() runs before a request's body is read (http_config.authorize): a request with
 * no token, or a token that is unknown or revoked, gets 401 with WWW-Authenticate; a valid token
 * whose role the route does not admit gets 403. The caller it found is kept in the request
 * (api_caller_of) for the handlers: a user token sees only the jobs it submitted (another's is a
 * 404, as if it did not exist); a worker token may act only as the workers it registered.
 *
 * Cost: every request hashes its token (SHA-256 of 43 bytes). Each HTTP thread remembers the
 * tokens it checked in the last API_AUTH_TTL_MS, so a client polling a job does not look its
 * token up in SQLite on every request. A token created or revoked through this server bumps
 * api_tokens_generation, which ends every remembered check at once; a token revoked in the
 * data dir while the server runs (trainyard token revoke --data-dir) stops working within
 * API_AUTH_TTL_MS. Only successful checks are remembered. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/api_priv.h"
#include "api/bodies.h"
#include "api/encode.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "util/timeutil.h"

#define API_AUTH_CACHE    16
#define API_AUTH_TTL_MS   1000
#define API_TOKEN_MAX_LEN 200 /* bytes of a bearer token we even look at */
#define API_CHALLENGE     "Bearer realm=\"trainyard\""

_Static_assert(sizeof(api_caller) <= HTTP_AUTH_BYTES, "api_caller must fit in http_auth()");

typedef struct api_auth_entry {
    char hash[DB_TOKEN_HASH_LEN + 1];
    api_caller who;
    uint64_t generation;
    int64_t at;
} api_auth_entry;

static _Thread_local api_auth_entry api_auth_cache[API_AUTH_CACHE];
static atomic_uint_fast64_t api_tokens_generation = 1;

const api_caller *api_caller_of(http_req *r)
{
    return http_auth(r);
}

int api_sees_every_job(const api_caller *c)
{
    return c->authenticated && (c->role == DB_ROLE_ADMIN || c->role == DB_ROLE_WORKER);
}

int api_may_see(http_req *r, const char *owner)
{
    const api_caller *c = api_caller_of(r);
    if (api_sees_every_job(c))
        return 1;
    return c->authenticated && c->role == DB_ROLE_USER && strcmp(c->token_id, owner) == 0;
}

int api_may_run_scripts(http_req *r)
{
    const api_caller *c = api_caller_of(r);
    return c->authenticated &&
           (c->role == DB_ROLE_ADMIN || (c->role == DB_ROLE_USER && c->scripts));
}

/* Which roles an access mask admits, as words for a 403's sentence. */
static void api_access_words(unsigned access, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int role = DB_ROLE_NONE + 1; role < DB_N_ROLES; role++) {
        if (!(access & API_ROLE_BIT(role)))
            continue;
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? " or " : "",
                              db_role_name(role));
    }
}

/* The bearer token of the request into *token; -EPERM with a sentence when there is none. */
static int api_bearer(http_req *r, const char **token)
{
    char *err = http_errbuf(r);
    const char *h = http_header(r, "Authorization");
    if (!h)
        return err_set(err, -EPERM,
                       "this endpoint needs a token: send \"Authorization: Bearer <token>\" (the "
                       "admin's is in admin.token in the server's data directory)");
    if (strncasecmp(h, "Bearer ", 7) != 0)
        return err_set(err, -EPERM, "Authorization must be \"Bearer <token>\"");
    h += 7;
    while (*h == ' ')
        h++;
    size_t len = strlen(h);
    while (len && h[len - 1] == ' ')
        len--;
    if (len == 0 || len > API_TOKEN_MAX_LEN || strcspn(h, " \t") < len) {
        http_header_add(r, "WWW-Authenticate", API_CHALLENGE ", error=\"invalid_token\"");
        return err_set(err, -EPERM, "the token is not valid: unknown or revoked");
    }
    *token = h;
    return (int)len;
}

int api_caller_of_token(app *a, const char *secret, api_caller *out, char *err)
{
    if (strlen(secret) > API_TOKEN_MAX_LEN)
        return err_set(err, -EPERM, "the token is not valid: unknown or revoked");
    char hash[DB_TOKEN_HASH_LEN + 1];
    db_token_hash(secret, hash);
    uint64_t generation = atomic_load(&api_tokens_generation);
    int64_t now = time_wall_ms();
    api_auth_entry *e = &api_auth_cache[(unsigned)(hash[0] + 31 * hash[1]) % API_AUTH_CACHE];
    if (e->generation == generation && now - e->at < API_AUTH_TTL_MS && now >= e->at &&
        strcmp(e->hash, hash) == 0) {
        *out = e->who;
        return 0;
    }
    db *d = app_db(a);
    if (!d)
        return err_set(err, -EIO, "the database cannot be opened; the server log says why");
    db_token t;
    int rc = db_token_find_hash(d, hash, &t, err);
    if (rc == -ENOENT)
        return err_set(err, -EPERM, "the token is not valid: unknown or revoked");
    if (rc < 0)
        return rc;
    memset(out, 0, sizeof *out);
    memcpy(out->token_id, t.id, sizeof out->token_id);
    out->role = t.role;
    out->scripts = t.scripts;
    out->max_queued = t.max_queued;
    out->authenticated = 1;
    memcpy(e->hash, hash, sizeof e->hash);
    e->who = *out;
    e->generation = generation;
    e->at = now;
    return 0;
}

/* A worker token acts only as the workers it registered. */
static int api_worker_owned(http_req *r, app *a, const api_caller *c)
{
    const char *worker = http_param(r, "worker");
    if (!worker || c->role != DB_ROLE_WORKER)
        return 0;
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    db_worker w;
    int rc = db_worker_get(d, worker, &w, http_errbuf(r));
    if (rc == -ENOENT)
        return 0; /* the handler answers 404: register again */
    if (rc < 0)
        return rc;
    int mine = strcmp(w.token_id, c->token_id) == 0;
    db_worker_clear(&w);
    if (!mine)
        return err_set(http_errbuf(r), -EACCES,
                       "worker %s was registered with another token: register this worker "
                       "again (POST /workers) with yours",
                       worker);
    return 0;
}

int api_authorize(http_req *r, void *ctx, unsigned access)
{
    app *a = ctx;
    if (access == API_PUBLIC)
        return 0;
    const char *token = NULL;
    int len = api_bearer(r, &token);
    if (len < 0)
        return len;
    char secret[API_TOKEN_MAX_LEN + 1];
    memcpy(secret, token, (size_t)len);
    secret[len] = '\0';
    api_caller *c = http_auth(r);
    int rc = api_caller_of_token(a, secret, c, http_errbuf(r));
    if (rc == -EPERM)
        http_header_add(r, "WWW-Authenticate", API_CHALLENGE ", error=\"invalid_token\"");
    if (rc < 0)
        return rc;
    if (!(access & API_ROLE_BIT(c->role))) {
        char need[64];
        api_access_words(access, need, sizeof need);
        return err_set(http_errbuf(r), -EACCES,
                       "a %s token may not call %s %s: it needs an %s token", db_role_name(c->role),
                       http_method(r), http_path(r), need);
    }
    return api_worker_owned(r, a, c);
}

/* ---- POST /tokens, GET /tokens, DELETE /tokens/{id} ------------------------------------- */

int api_tokens_create(http_req *r, void *ctx)
{
    app *a = ctx;
    json_t *body = NULL;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    field_errors errs;
    db_token spec, t;
    rc = api_token_request_parse(body, &spec, &errs);
    json_decref(body);
    if (rc < 0)
        return api_reply_invalid(r, "Invalid token request", &errs);
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    char secret[DB_TOKEN_SECRET_LEN + 1];
    char *err = http_errbuf(r);
    rc = db_token_create_capped(d, &spec, time_wall_ms(), &t, secret, err);
    if (rc < 0)
        return rc;
    atomic_fetch_add(&api_tokens_generation, 1);
    app_log(a, "token %s created: %s (%s) by token %s", t.id, t.name, db_role_name(t.role),
            api_caller_of(r)->token_id);
    json_t *o = api_encode_token(&t);
    if (!o || json_object_set_new(o, "token", json_string(secret)) < 0) {
        json_decref(o);
        return err_set(err, -ENOMEM, "out of memory");
    }
    char loc[DB_ID_LEN + 16];
    snprintf(loc, sizeof loc, "/tokens/%s", t.id);
    http_header_add(r, "Location", loc);
    return http_reply_json(r, 201, o);
}

static int api_token_add(void *ctx, const db_token *t)
{
    json_t *o = api_encode_token(t);
    return o && json_array_append_new(ctx, o) == 0 ? 0 : -ENOMEM;
}

int api_tokens_list(http_req *r, void *ctx)
{
    app *a = ctx;
    int revoked = 0;
    if (api_parse_bool(http_query(r, "revoked"), 0, &revoked) < 0)
        return api_reply_bad_param(r, "revoked", "must be true or false");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    json_t *list = json_array();
    int rc = list ? db_token_list(d, revoked, api_token_add, list, http_errbuf(r)) : -ENOMEM;
    return api_reply_list(r, "tokens", list, rc);
}

int api_tokens_revoke(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *id = http_param(r, "id");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    db_token t;
    int rc = db_token_get(d, id, &t, err);
    if (rc == -ENOENT || (rc == 0 && t.revoked_at))
        return err_set(err, -ENOENT, "no active token has the id %s", id);
    if (rc < 0)
        return rc;
    if (t.role == DB_ROLE_ADMIN) {
        int64_t admins = 0;
        rc = db_token_count(d, DB_ROLE_ADMIN, &admins, err);
        if (rc < 0)
            return rc;
        if (admins <= 1)
            return err_set(err, -EBUSY,
                           "token %s is the last admin token: create another admin token first",
                           id);
    }
    rc = db_token_revoke(d, id, time_wall_ms(), err);
    if (rc < 0)
        return rc;
    atomic_fetch_add(&api_tokens_generation, 1);
    app_log(a, "token %s revoked: %s (%s) by token %s", t.id, t.name, db_role_name(t.role),
            api_caller_of(r)->token_id);
    return http_reply_empty(r, 204);
}
