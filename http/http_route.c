/* http_route: matching a request to its route, and what a handler reads of the request.
 *
 * Paths arrive raw (the daemon's unescape callback leaves them alone). Matching walks the
 * pattern and the path segment by segment; each path segment is percent-decoded once, strictly
 * (a bad escape or an encoded NUL matches nothing). A literal segment must equal the decoded
 * one; a {param} takes it if it is not empty and holds no '/', no control character and only
 * valid UTF-8. A {param} may be followed by a literal in its segment ("{name}:predict", as
 * TensorFlow Serving's REST paths are): the decoded segment must end with it, and the param
 * takes the rest (not empty). HEAD matches GET routes (libmicrohttpd drops the body). When the path
 * matches routes but none with this method, the answer is 405 with Allow listing theirs.
 *
 * Query arguments are decoded leniently on first use (libmicrohttpd has already turned '+'
 * into ' '; a malformed escape stays as written; an argument with an encoded NUL is dropped);
 * at most HTTP_MAX_QUERY are kept, the first of a repeated name wins. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "http/http_priv.h"
#include "util/utf8.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes [p, p+n) into a new string. strict: a bad escape fails; otherwise it is kept
 * as written. Fails (NULL) on a decoded NUL or no memory. */
static char *pct_decode(const char *p, size_t n, int strict)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (p[i] != '%') {
            out[o++] = p[i];
            continue;
        }
        hi = i + 1 < n ? hexval(p[i + 1]) : -1;
        lo = i + 2 < n ? hexval(p[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            if (strict)
                goto fail;
            out[o++] = p[i];
            continue;
        }
        if (hi == 0 && lo == 0)
            goto fail;
        out[o++] = (char)(hi << 4 | lo);
        i += 2;
    }
    out[o] = '\0';
    return out;
fail:
    free(out);
    return NULL;
}

/* ---- routing -------------------------------------------------------------------------------- */

/* A decoded segment may be a parameter's value: not empty, no '/', no control character, UTF-8. */
static int param_ok(const char *v)
{
    const unsigned char *p = (const unsigned char *)v;
    size_t n = strlen(v);

    if (n == 0)
        return 0;
    while (n > 0) {
        size_t len = utf8_seq_len(p, n);
        if (len == 0 || (len == 1 && (*p < 0x20 || *p == 0x7F || *p == '/')))
            return 0;
        p += len;
        n -= len;
    }
    return 1;
}

/* Matches path against rt->pattern; on a match fills names/values (values are new strings). */
static int route_match(const http_route *rt, const char *path, const char **names,
                       size_t *name_lens, char **values, int *n_out, int *suffixes)
{
    const char *pp = rt->pattern, *up = path;
    int n = 0;
    *suffixes = 0;

    while (*pp == '/' && *up == '/') {
        const char *pend, *uend;
        char *seg;
        pp++;
        up++;
        pend = strchrnul(pp, '/');
        uend = strchrnul(up, '/');
        seg = pct_decode(up, (size_t)(uend - up), 1);
        if (!seg)
            goto fail;
        if (*pp == '{') {
            /* "{name}:verb": the segment must end with the literal after the brace, and the
             * parameter takes what comes before it */
            const char *close = memchr(pp, '}', (size_t)(pend - pp));
            size_t suffix = (size_t)(pend - close - 1), len = strlen(seg);
            if (suffix) {
                if (len <= suffix || memcmp(seg + len - suffix, close + 1, suffix) != 0) {
                    free(seg);
                    goto fail;
                }
                seg[len - suffix] = '\0';
                ++*suffixes;
            }
            if (n >= HTTP_MAX_PARAMS || !param_ok(seg)) {
                free(seg);
                goto fail;
            }
            names[n] = pp + 1;
            name_lens[n] = (size_t)(close - pp - 1);
            values[n++] = seg;
        } else {
            int same = strlen(seg) == (size_t)(pend - pp) && memcmp(seg, pp, strlen(seg)) == 0;
            free(seg);
            if (!same)
                goto fail;
        }
        pp = pend;
        up = uend;
    }
    if (*pp != '\0' || *up != '\0')
        goto fail;
    *n_out = n;
    return 1;
fail:
    for (int i = 0; i < n; i++)
        free(values[i]);
    return 0;
}

static int method_ok(const char *route_method, const char *method)
{
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

static void allow_add(char *allow, size_t cap, const char *method)
{
    const char *p = allow;
    size_t n = strlen(method);

    while ((p = strstr(p, method))) {
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
            return;
        p += n;
    }
    if (allow[0])
        strncat(allow, ", ", cap - strlen(allow) - 1);
    strncat(allow, method, cap - strlen(allow) - 1);
}

/* Finds r's route; on none, records the 404 or 405 (with Allow) to answer. */
void http_route_find(http_req *r)
{
    const http_config *cfg = &r->s->cfg;
    char allow[128] = "";
    int best = -1;

    for (size_t i = 0; i < cfg->n_routes; i++) {
        const http_route *rt = &cfg->routes[i];
        const char *names[HTTP_MAX_PARAMS];
        size_t lens[HTTP_MAX_PARAMS];
        char *values[HTTP_MAX_PARAMS];
        int n = 0, suffixes = 0;

        if (!route_match(rt, r->path, names, lens, values, &n, &suffixes))
            continue;
        /* The most specific patterns win: "/m/{name}:predict" takes "/m/x:predict" from
         * "/m/{name}" (whose param would be "x:predict"), for the method and for Allow. */
        if (suffixes < best) {
            for (int k = 0; k < n; k++)
                free(values[k]);
            continue;
        }
        if (suffixes > best) {
            best = suffixes;
            allow[0] = '\0';
            for (int k = 0; k < r->n_params; k++)
                free(r->param_value[k]);
            r->route = NULL;
            r->n_params = 0;
        }
        allow_add(allow, sizeof(allow), rt->method);
        if (strcmp(rt->method, "GET") == 0)
            allow_add(allow, sizeof(allow), "HEAD");
        if (r->route || !method_ok(rt->method, r->method)) {
            for (int k = 0; k < n; k++)
                free(values[k]);
            continue;
        }
        r->route = rt;
        r->n_params = n;
        for (int k = 0; k < n; k++) {
            r->param_name[k] = names[k];
            r->param_name_len[k] = lens[k];
            r->param_value[k] = values[k];
        }
    }
    if (r->route)
        return;
    if (allow[0]) {
        r->reject_status = 405;
        snprintf(r->reject_detail, sizeof(r->reject_detail), "allowed methods: %s", allow);
        http_header_add(r, "Allow", allow);
    } else {
        r->reject_status = 404;
        snprintf(r->reject_detail, sizeof(r->reject_detail), "no such path");
    }
}

/* ---- the request, read side ----------------------------------------------------------------- */

const char *http_method(const http_req *r)
{
    return r->method;
}

const char *http_path(const http_req *r)
{
    return r->path;
}

const char *http_param(const http_req *r, const char *name)
{
    size_t n = strlen(name);

    for (int i = 0; i < r->n_params; i++)
        if (r->param_name_len[i] == n && memcmp(r->param_name[i], name, n) == 0)
            return r->param_value[i];
    return NULL;
}

static enum MHD_Result query_collect(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    http_req *r = cls;
    char *k, *v;

    (void)kind;
    if (r->n_query >= HTTP_MAX_QUERY)
        return MHD_NO;
    k = pct_decode(key, strlen(key), 0);
    v = pct_decode(value ? value : "", value ? strlen(value) : 0, 0);
    if (!k || !v) { /* an encoded NUL: the request is refused (see http_query_check) */
        if (!r->query_nul[0])
            snprintf(r->query_nul, sizeof r->query_nul, "%.60s", k ? k : "?");
        free(k);
        free(v);
        return MHD_YES;
    }
    r->query[r->n_query].name = k;
    r->query[r->n_query].value = v;
    r->n_query++;
    return MHD_YES;
}

int http_query_check(http_req *r)
{
    http_query(r, "");
    if (!r->query_nul[0])
        return 0;
    char detail[160];
    snprintf(detail, sizeof detail, "query argument %s holds an encoded NUL (%%00)", r->query_nul);
    http_reply_problem(r, 400, "Invalid parameter", detail, NULL, 0);
    return 1;
}

const char *http_query(const http_req *r, const char *name)
{
    http_req *w = (http_req *)r; /* decoded lazily: the cache is not part of the request's value */

    if (!w->query_done) {
        w->query_done = 1;
        MHD_get_connection_values(w->conn, MHD_GET_ARGUMENT_KIND, query_collect, w);
    }
    for (int i = 0; i < r->n_query; i++)
        if (strcmp(r->query[i].name, name) == 0)
            return r->query[i].value;
    return NULL;
}

const char *http_header(const http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_body(const http_req *r, size_t *len)
{
    if (len)
        *len = dynbuf_len(&r->body);
    return dynbuf_str(&r->body);
}

const char *http_body_file(const http_req *r, uint64_t *len)
{
    if (len)
        *len = r->body_path ? r->body_seen : 0;
    return r->body_path;
}

const char *http_body_sha256(const http_req *r)
{
    return r->body_path && r->body_sha256[0] ? r->body_sha256 : NULL;
}

char *http_errbuf(http_req *r)
{
    return r->errbuf;
}

void http_state_set(http_req *r, void *state, void (*free_fn)(void *))
{
    if (r->state_free && r->state != state)
        r->state_free(r->state);
    r->state = state;
    r->state_free = free_fn;
}

void *http_state(const http_req *r)
{
    return r->state;
}

int http_wakeups(const http_req *r)
{
    return r->wakeups;
}

int http_parked_timeout(const http_req *r)
{
    return r->timed_out;
}
