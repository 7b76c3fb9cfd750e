/* web: GET / and GET /web/{name}, the dashboard.
 *
 * The files are public (API_PUBLIC): the page holds no secret, and every call it makes for data
 * carries the token the person typed in. They are the bytes of web/ embedded at build time
 * (api/embed_web.py → api/web.h), so the binary needs nothing on disk and nothing from a
 * network. Each answer carries:
 *   - ETag, the SHA-256 of the bytes; a matching If-None-Match is a 304 with no body;
 *   - Cache-Control: no-cache — the names do not change between builds, so a browser keeps the
 *     file but asks each time, and a 304 costs it nothing;
 *   - a Content-Security-Policy that admits only this origin for scripts, styles, images and
 *     fetches, with no inline script or style, no frames and no plugins; and nosniff, no
 *     referrer.
 * A name web/ does not hold is a 404 problem+json. */
#include <errno.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/web.h"

#define API_WEB_CSP                                                                                \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "        \
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

const api_web_file *api_web_find(const char *name)
{
    for (size_t i = 0; i < api_web_files_n; i++)
        if (strcmp(api_web_files[i].name, name) == 0)
            return &api_web_files[i];
    return NULL;
}

static int api_web_reply(http_req *r, const char *name)
{
    const api_web_file *f = api_web_find(name);
    if (!f)
        return err_set(http_errbuf(r), -ENOENT, "the dashboard has no file %s", name);
    int rc = http_header_add(r, "ETag", f->etag);
    if (rc == 0)
        rc = http_header_add(r, "Cache-Control", "no-cache");
    if (rc == 0)
        rc = http_header_add(r, "Content-Security-Policy", API_WEB_CSP);
    if (rc == 0)
        rc = http_header_add(r, "X-Content-Type-Options", "nosniff");
    if (rc == 0)
        rc = http_header_add(r, "Referrer-Policy", "no-referrer");
    if (rc < 0)
        return err_set(http_errbuf(r), rc, "cannot add the headers of %s", name);
    const char *inm = http_header(r, "If-None-Match");
    if (inm && http_etag_match(inm, f->etag))
        return http_reply_empty(r, 304);
    return http_reply_bytes(r, 200, f->content_type, f->data, f->len);
}

int api_web_index(http_req *r, void *ctx)
{
    (void)ctx;
    return api_web_reply(r, "index.html");
}

int api_web_file_get(http_req *r, void *ctx)
{
    (void)ctx;
    return api_web_reply(r, http_param(r, "name"));
}
