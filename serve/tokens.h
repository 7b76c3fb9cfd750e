/* serve/tokens: the tokens of a data directory, read and written in its database directly, for
 * `trainyard token --data-dir` (how the first tokens are made by hand, and how an admin who lost
 * admin.token gets back in). The same rows POST/GET/DELETE /tokens write; a running server
 * notices a revoke within a second (api/auth.c). The CLI reaches the database, the API's token
 * encoding and the webhook secrets only through here. */
#ifndef TRAINYARD_SERVE_TOKENS_H
#define TRAINYARD_SERVE_TOKENS_H

#include <jansson.h>

#define SERVE_TOKEN_SECRET_MAX 80      /* bytes of a token or webhook secret, terminator included */
#define SERVE_TOKEN_CAP_MAX    1000000 /* the largest max_running or max_queued (the API's) */

/* 1 when role names a token role (admin, user, worker, metrics), else 0. */
int serve_token_role_valid(const char *role);
/* A new token with the scripts right and caps (max_running, max_queued; 0: none): *out its
 * JSON as GET /tokens shows it (new reference), secret its secret, shown this once. 0, or a
 * negative code with err. */
int serve_token_create(const char *data_dir, const char *name, const char *role, int scripts,
                       int max_running, int max_queued, json_t **out,
                       char secret[SERVE_TOKEN_SECRET_MAX], char *err);
/* Every token (revoked ones too when revoked is set) as a JSON array (new reference). */
int serve_token_list(const char *data_dir, int revoked, json_t **out, char *err);
/* Revokes token id; -ENOENT when there is none. */
int serve_token_revoke(const char *data_dir, const char *id, char *err);
/* A new webhook secret for token id, or with id NULL the data directory's server-wide one
 * (made when missing, else the one there), into secret. */
int serve_token_webhook_secret(const char *data_dir, const char *id,
                               char secret[SERVE_TOKEN_SECRET_MAX], char *err);

#endif
