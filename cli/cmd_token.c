/* cmd_token: `trainyard token create|list|revoke` — API tokens, managed through a running
 * server (POST/GET/DELETE /tokens with an admin token) or, with --data-dir, directly in the
 * server's database, which is how the first tokens are made by hand and how an admin who lost
 * admin.token gets back in. Both ways write the same rows; a running server notices a token
 * revoked in its data dir within a second (api/auth.c).
 *
 * `create` prints the secret alone on stdout (so TOKEN=$(trainyard token create ...) works)
 * and what it is on stderr; the secret is shown this once and never stored. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cli_client.h"
#include "serve/tokens.h"
#include "util/err.h"
#include "util/json_out.h"
#include "client/client.h"

static const char usage_text[] =
    "usage: trainyard token create --name NAME --role admin|user|worker|metrics [--scripts]\n"
    "                              [--max-running N] [--max-queued N] [options]\n"
    "       trainyard token list [--revoked] [options]\n"
    "       trainyard token revoke ID [options]\n"
    "       trainyard token webhook-secret ID [options]\n"
    "       trainyard token webhook-secret --server-wide --data-dir DIR\n"
    "\n"
    "Manages the API's bearer tokens. An admin token sees every job and manages tokens; a user\n"
    "token sees only the jobs it submitted; a worker token speaks only the worker protocol;\n"
    "a metrics token may only scrape GET /metrics. --scripts gives a user token the right to\n"
    "upload code (POST /code) and submit script jobs (training_script); admins always may.\n"
    "--max-running N: at most N of the token's jobs run at once (the others wait, queued,\n"
    "with the reason token_cap); --max-queued N: at most N of its jobs are queued or running,\n"
    "and a submit beyond that is refused (429). Both from 1 to 1000000; default: no cap.\n"
    "`create` prints the new token alone on stdout; it is shown this once.\n"
    "`webhook-secret ID` gives the token a new webhook secret, which signs the webhooks of\n"
    "its jobs (X-Trainyard-Signature), and prints it alone on stdout, this once; a user token\n"
    "may set its own. --server-wide prints the data directory's secret, which signs the\n"
    "webhooks of jobs whose token has none (made on first use).\n"
    "\n"
    "Through the server, with an admin token (the connection flags below); or:\n"
    "  --data-dir DIR   work on the server's data directory directly instead (for the first\n"
    "                   tokens, or when the server is down)\n"
    "\n" CLI_CONN_HELP;

typedef struct token_opts {
    cli_conn conn; /* --server, --token, --ca, --json */
    const char *verb, *name, *role, *id, *data_dir;
    int revoked, scripts, server_wide;
    long max_running, max_queued; /* 0: no cap */
} token_opts;

static int token_args(int argc, char **argv, token_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_conn_init(&o->conn, "token");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 1;
        }
        int taken = cli_conn_flag(&o->conn, argc, argv, &i);
        if (taken < 0)
            return -1;
        if (taken)
            continue;
        if (!strcmp(a, "--server-wide")) {
            o->server_wide = 1;
            continue;
        }
        if (!strcmp(a, "--revoked") || !strcmp(a, "--scripts")) {
            *(!strcmp(a, "--revoked") ? &o->revoked : &o->scripts) = 1;
            continue;
        }
        if (!strcmp(a, "--max-running") || !strcmp(a, "--max-queued")) {
            char *end = NULL;
            long n = v ? strtol(v, &end, 10) : 0;
            if (!v || end == v || *end || n < 1 || n > SERVE_TOKEN_CAP_MAX) {
                fprintf(stderr, "trainyard token: %s takes a number from 1 to %d\n", a,
                        SERVE_TOKEN_CAP_MAX);
                return -1;
            }
            *(!strcmp(a, "--max-running") ? &o->max_running : &o->max_queued) = n;
            i++;
            continue;
        }
        const char **slot = !strcmp(a, "--name")       ? &o->name
                            : !strcmp(a, "--role")     ? &o->role
                            : !strcmp(a, "--data-dir") ? &o->data_dir
                                                       : NULL;
        if (slot) {
            if (!v) {
                fprintf(stderr, "trainyard token: '%s' needs a value (try --help)\n", a);
                return -1;
            }
            *slot = v;
            i++;
        } else if (a[0] == '-') {
            fprintf(stderr, "trainyard token: unknown option '%s' (try --help)\n", a);
            return -1;
        } else if (!o->verb) {
            o->verb = a;
        } else if (!o->id) {
            o->id = a;
        } else {
            fprintf(stderr, "trainyard token: unexpected argument '%s' (try --help)\n", a);
            return -1;
        }
    }
    if (!o->verb || (strcmp(o->verb, "create") && strcmp(o->verb, "list") &&
                     strcmp(o->verb, "revoke") && strcmp(o->verb, "webhook-secret"))) {
        fprintf(stderr,
                "trainyard token: say create, list, revoke or webhook-secret (try --help)\n");
        return -1;
    }
    if (!strcmp(o->verb, "webhook-secret")) {
        if (o->server_wide ? (o->id || !o->data_dir) : !o->id) {
            fprintf(stderr, "trainyard token webhook-secret: give a token ID, or --server-wide "
                            "with --data-dir\n");
            return -1;
        }
        return 0;
    }
    if (o->server_wide) {
        fprintf(stderr, "trainyard token: --server-wide goes with webhook-secret\n");
        return -1;
    }
    if (!strcmp(o->verb, "create") && (!o->name || !o->role)) {
        fprintf(stderr, "trainyard token create: --name and --role are needed\n");
        return -1;
    }
    if (!strcmp(o->verb, "create") && !serve_token_role_valid(o->role)) {
        fprintf(stderr,
                "trainyard token create: --role is admin, user, worker or metrics, not '%s'\n",
                o->role);
        return -1;
    }
    if ((o->scripts || o->max_running || o->max_queued) && strcmp(o->verb, "create") != 0) {
        fprintf(stderr, "trainyard token: --scripts, --max-running and --max-queued go with "
                        "create\n");
        return -1;
    }
    if ((strcmp(o->verb, "revoke") == 0) != (o->id != NULL)) {
        fprintf(stderr, "trainyard token: revoke takes one token ID; %s takes none\n", o->verb);
        return -1;
    }
    return 0;
}

static void print_created(const token_opts *o, json_t *t, const char *secret)
{
    if (o->conn.json) {
        json_object_set_new(t, "token", json_string(secret));
        json_out_dumpf(t, stdout, JSON_INDENT(2));
        putchar('\n');
        return;
    }
    fprintf(stderr, "token %s (%s, %s) created; it is shown only now:\n",
            json_string_value(json_object_get(t, "id")),
            json_string_value(json_object_get(t, "name")),
            json_string_value(json_object_get(t, "role")));
    printf("%s\n", secret);
}

static void print_list(const token_opts *o, json_t *tokens)
{
    if (o->conn.json) {
        json_t *doc = json_pack("{s:O}", "tokens", tokens);
        json_out_dumpf(doc, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(doc);
        return;
    }
    printf("%-32s  %-6s  %-24s  %-24s  %-11s  %-10s  %s\n", "ID", "ROLE", "CREATED", "REVOKED",
           "MAX-RUNNING", "MAX-QUEUED", "NAME");
    size_t i;
    json_t *t;
    json_array_foreach (tokens, i, t) {
        const char *rev = json_string_value(json_object_get(t, "revoked_at"));
        char caps[2][24];
        for (int k = 0; k < 2; k++) {
            json_t *cap = json_object_get(t, k ? "max_queued" : "max_running");
            if (json_is_integer(cap))
                snprintf(caps[k], sizeof caps[k], "%lld", (long long)json_integer_value(cap));
            else
                snprintf(caps[k], sizeof caps[k], "-");
        }
        printf("%-32s  %-6s  %-24s  %-24s  %-11s  %-10s  %s\n",
               json_string_value(json_object_get(t, "id")),
               json_string_value(json_object_get(t, "role")),
               json_string_value(json_object_get(t, "created_at")), rev ? rev : "-", caps[0],
               caps[1], json_string_value(json_object_get(t, "name")));
    }
}

/* --data-dir: the database itself, through serve/tokens.h. */
static int token_local(const token_opts *o)
{
    char err[ERR_LEN], secret[SERVE_TOKEN_SECRET_MAX];
    json_t *j = NULL;
    int rc;
    if (!strcmp(o->verb, "create")) {
        rc = serve_token_create(o->data_dir, o->name, o->role, o->scripts, (int)o->max_running,
                                (int)o->max_queued, &j, secret, err);
        if (rc == 0)
            print_created(o, j, secret);
    } else if (!strcmp(o->verb, "list")) {
        rc = serve_token_list(o->data_dir, o->revoked, &j, err);
        if (rc == 0)
            print_list(o, j);
    } else if (!strcmp(o->verb, "webhook-secret")) {
        rc = serve_token_webhook_secret(o->data_dir, o->server_wide ? NULL : o->id, secret, err);
        if (rc == 0 && !o->server_wide)
            fprintf(stderr, "token %s has a new webhook secret; it is shown only now:\n", o->id);
        if (rc == 0)
            printf("%s\n", secret);
    } else {
        rc = serve_token_revoke(o->data_dir, o->id, err);
        if (rc == 0)
            fprintf(stderr, "token %s revoked\n", o->id);
    }
    explicit_bzero(secret, sizeof secret);
    json_decref(j);
    if (rc < 0)
        fprintf(stderr, "trainyard token: %s\n", err);
    return rc < 0 ? 1 : 0;
}

/* Through the API. */
static int token_remote(const token_opts *o)
{
    char err[ERR_LEN];
    client *c = NULL;
    cli_conn conn = o->conn;
    int rc = cli_conn_open(&conn, &c);
    if (rc != 0)
        return rc;
    long status = 0;
    json_t *reply = NULL;
    int ok;
    if (!strcmp(o->verb, "create")) {
        json_t *body =
            json_pack("{s:s, s:s, s:b}", "name", o->name, "role", o->role, "scripts", o->scripts);
        if (body && o->max_running)
            json_object_set_new(body, "max_running", json_integer(o->max_running));
        if (body && o->max_queued)
            json_object_set_new(body, "max_queued", json_integer(o->max_queued));
        rc = client_post_json(c, "/tokens", body, &status, &reply, err);
        json_decref(body);
        ok = rc == 0 && status == 201 && json_is_string(json_object_get(reply, "token"));
        if (ok) {
            char secret[SERVE_TOKEN_SECRET_MAX];
            snprintf(secret, sizeof secret, "%s",
                     json_string_value(json_object_get(reply, "token")));
            json_object_del(reply, "token");
            print_created(o, reply, secret);
        }
    } else if (!strcmp(o->verb, "list")) {
        rc = client_get_json(c, o->revoked ? "/tokens?revoked=true" : "/tokens", &status, &reply,
                             err);
        ok = rc == 0 && status == 200 && json_is_array(json_object_get(reply, "tokens"));
        if (ok)
            print_list(o, json_object_get(reply, "tokens"));
    } else if (!strcmp(o->verb, "webhook-secret")) {
        char path[256];
        snprintf(path, sizeof path, "/tokens/%s/webhook-secret", o->id);
        rc = client_post_json(c, path, NULL, &status, &reply, err);
        ok = rc == 0 && status == 200 && json_is_string(json_object_get(reply, "secret"));
        if (ok && o->conn.json) {
            json_out_dumpf(reply, stdout, JSON_INDENT(2));
            putchar('\n');
        } else if (ok) {
            fprintf(stderr, "token %s has a new webhook secret; it is shown only now:\n", o->id);
            printf("%s\n", json_string_value(json_object_get(reply, "secret")));
        }
    } else {
        char path[256];
        snprintf(path, sizeof path, "/tokens/%s", o->id);
        rc = client_delete(c, path, &status, &reply, err);
        ok = rc == 0 && status == 204;
        if (ok)
            fprintf(stderr, "token %s revoked\n", o->id);
    }
    rc = rc < 0 ? cli_no_answer(&conn, rc, err)
         : ok   ? CLI_EXIT_OK
                : cli_refused(&conn, status, reply);
    json_decref(reply);
    client_free(c);
    return rc;
}

int cmd_token(int argc, char **argv)
{
    token_opts o;
    int rc = token_args(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    return o.data_dir ? token_local(&o) : token_remote(&o);
}
