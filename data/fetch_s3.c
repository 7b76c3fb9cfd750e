/* fetch_s3: what fetch.c needs to turn an s3:// URL into a signed http(s) GET, as fetch.h
 * describes: the endpoint and credentials from the environment and the flags, the path-style
 * URL, the request headers, and the S3 error code of a failed answer.
 *
 * The URL: s3://bucket/key → <endpoint>/<bucket>/<key>. The bucket is 3..63 of [a-z0-9.-]
 * (the names S3 allows in path-style requests); the key is percent-decoded as written and then
 * encoded as SigV4 canonicalises a path (every byte but A-Z a-z 0-9 - . _ ~ and '/'), so the
 * path curl sends is the one it signs and the one S3 checks. A key holding NUL or a control
 * character once decoded is refused.
 *
 * The signature: curl 7.88's CURLOPT_AWS_SIGV4 signs host, x-amz-date and every x-amz-* header
 * it is given, and takes the payload hash of the canonical request from x-amz-content-sha256
 * when that header is there. S3 (and moto) insist on that header, and curl 7.88 does not add it
 * for s3, so fetch.c sends it: the SHA-256 of the empty body, which is what a GET carries and
 * what curl computes itself when it does not read the header (so the signature holds either
 * way). */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"
#include "data/fetch.h"
#include "data/fetch_priv.h"

#define S3_DEFAULT_REGION "us-east-1"

/* The value of environment variable name, NULL when unset or empty. */
static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void fetch_s3_from_env(fetch_s3 *s3, const char *endpoint_flag, const char *region_flag)
{
    memset(s3, 0, sizeof *s3);
    s3->endpoint = env_value("AWS_ENDPOINT_URL_S3");
    if (!s3->endpoint)
        s3->endpoint = env_value("AWS_ENDPOINT_URL");
    s3->region = env_value("AWS_REGION");
    if (!s3->region)
        s3->region = env_value("AWS_DEFAULT_REGION");
    if (endpoint_flag && *endpoint_flag)
        s3->endpoint = endpoint_flag;
    if (region_flag && *region_flag)
        s3->region = region_flag;
    s3->access_key = env_value("AWS_ACCESS_KEY_ID");
    s3->secret_key = env_value("AWS_SECRET_ACCESS_KEY");
    s3->session_token = env_value("AWS_SESSION_TOKEN");
}

const char *fetch_s3_region(const fetch_s3 *s3)
{
    return s3->region ? s3->region : S3_DEFAULT_REGION;
}

/* Whether region can go into the signing scope and a host name: 1..32 of [a-z0-9-]. */
static int region_ok(const char *region)
{
    size_t n = strlen(region);
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)region[i]) && !isdigit((unsigned char)region[i]) &&
            region[i] != '-')
            return 0;
    return 1;
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Appends key (percent-decoded first) to out, encoded as a SigV4 canonical path. out has room
 * for 3 bytes per byte of key and a NUL. */
static int encode_key(const char *key, const char *shown, char *out, char *err)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(out);
    for (const char *p = key; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '%') {
            int hi = hex_value((unsigned char)p[1]),
                lo = hi < 0 ? -1 : hex_value((unsigned char)p[2]);
            if (hi < 0 || lo < 0)
                return err_set(err, -EINVAL,
                               "bad s3 URL %s: a '%%' in the key must start a %%XX escape "
                               "(write a literal '%%' as %%25)",
                               shown);
            c = (unsigned char)(hi * 16 + lo);
            p += 2;
            if (c < 0x20 || c == 0x7f)
                return err_set(err, -EINVAL, "bad s3 URL %s: the key holds a control character",
                               shown);
        }
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

int fetch_s3_url(const char *s3url, const fetch_s3 *s3, char **http_url, char *err)
{
    char shown[220];
    snprintf(shown, sizeof shown, "%.200s%s", s3url, strlen(s3url) > 200 ? "..." : "");
    for (char *p = shown; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            *p = '?';
    if (strncmp(s3url, "s3://", 5) != 0)
        return err_set(err, -EINVAL, "bad s3 URL %s: it must start with s3://", shown);
    const char *bucket = s3url + 5, *slash = strchr(bucket, '/');
    size_t bn = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (bn < 3 || bn > 63)
        return err_set(err, -EINVAL,
                       "bad s3 URL %s: write s3://bucket/key with a bucket name of 3 to 63 "
                       "characters",
                       shown);
    for (size_t i = 0; i < bn; i++) {
        unsigned char c = (unsigned char)bucket[i];
        if (!islower(c) && !isdigit(c) && c != '.' && c != '-')
            return err_set(err, -EINVAL,
                           "bad s3 URL %s: a bucket name holds only a-z, 0-9, '.' and '-' (no "
                           "user:password@: credentials come from the worker's AWS_* variables)",
                           shown);
    }
    if (!slash || slash[1] == '\0')
        return err_set(err, -EINVAL, "bad s3 URL %s: no key after the bucket (s3://bucket/key)",
                       shown);
    const char *region = fetch_s3_region(s3);
    if (!region_ok(region))
        return err_set(err, -EINVAL,
                       "the S3 region '%.40s' is not a region name (letters, digits and '-', "
                       "e.g. eu-west-1): check --s3-region or AWS_REGION",
                       region);
    char def[96];
    const char *ep = s3->endpoint;
    if (!ep) {
        snprintf(def, sizeof def, "https://s3.%s.amazonaws.com", region);
        ep = def;
    }
    if (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8) != 0)
        return err_set(err, -EINVAL,
                       "the S3 endpoint '%.100s' is not an http:// or https:// URL: check "
                       "--s3-endpoint or AWS_ENDPOINT_URL_S3",
                       ep);
    if (strpbrk(ep, "?#"))
        return err_set(
            err, -EINVAL,
            "the S3 endpoint '%.100s' has a query or fragment; give scheme://host[:port]", ep);
    size_t en = strlen(ep);
    while (en > 0 && ep[en - 1] == '/')
        en--;
    size_t key_len = strlen(slash + 1);
    char *url = malloc(en + 1 + bn + 1 + 3 * key_len + 1);
    if (!url)
        return err_set(err, -ENOMEM, "out of memory");
    memcpy(url, ep, en);
    url[en] = '/';
    memcpy(url + en + 1, bucket, bn);
    url[en + 1 + bn] = '/';
    url[en + 2 + bn] = '\0';
    int rc = encode_key(slash + 1, shown, url, err);
    if (rc < 0) {
        free(url);
        return rc;
    }
    *http_url = url;
    return 0;
}

/* Copies the text of the first <tag>...</tag> in body into out[cap] as printable ASCII;
 * "" when absent. */
static void xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap)
{
    char open[32];
    snprintf(open, sizeof open, "<%s>", tag);
    out[0] = '\0';
    const char *end = body + len, *p = body;
    size_t on = strlen(open);
    while (p + on <= end && memcmp(p, open, on) != 0)
        p++;
    if (p + on > end)
        return;
    p += on;
    size_t n = 0;
    while (p < end && *p != '<' && n + 1 < cap) {
        unsigned char c = (unsigned char)*p++;
        out[n++] = c < 0x20 || c > 0x7e ? ' ' : (char)c;
    }
    out[n] = '\0';
}

int fetch_s3_error(long status, const char *body, size_t len, const char *shown, char *err)
{
    char code[64], msg[256];
    xml_text(body ? body : "", body ? len : 0, "Code", code, sizeof code);
    xml_text(body ? body : "", body ? len : 0, "Message", msg, sizeof msg);
    int rc = status == 404 ? -ENOENT : status == 403 ? -EACCES : -EIO;
    const char *hint = "";
    if (!strcmp(code, "SignatureDoesNotMatch"))
        hint = ": check AWS_SECRET_ACCESS_KEY (and --s3-region)";
    else if (!strcmp(code, "InvalidAccessKeyId"))
        hint = ": check AWS_ACCESS_KEY_ID";
    else if (!strcmp(code, "AccessDenied"))
        hint = ": the worker's credentials may not read it";
    else if (!strcmp(code, "NoSuchKey"))
        hint = ": no object has that key in the bucket";
    else if (!strcmp(code, "NoSuchBucket"))
        hint = ": no such bucket at this endpoint";
    else if (!strcmp(code, "PermanentRedirect") || !strcmp(code, "AuthorizationHeaderMalformed"))
        hint = ": the bucket is in another region; set --s3-region or AWS_REGION";
    if (code[0])
        return err_set(err, rc, "S3 error %s (HTTP %ld) for %s%s%s%s", code, status, shown, hint,
                       msg[0] ? "; S3 says: " : "", msg);
    return err_set(err, rc, "HTTP %ld from S3 for %s", status, shown);
}

int fetch_s3_headers(const fetch_s3 *s3, struct curl_slist **list, char *err)
{
    const char *token = s3->session_token;
    char *line = NULL;
    struct curl_slist *more =
        curl_slist_append(*list, "x-amz-content-sha256: " FETCH_S3_EMPTY_SHA256);
    if (!more)
        return err_set(err, -ENOMEM, "out of memory");
    *list = more;
    if (!token || !*token)
        return 0;
    for (const char *p = token; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return err_set(err, -EINVAL,
                           "AWS_SESSION_TOKEN holds a character that cannot go into a header");
    size_t n = strlen(token) + sizeof "x-amz-security-token: ";
    line = malloc(n);
    if (!line)
        return err_set(err, -ENOMEM, "out of memory");
    snprintf(line, n, "x-amz-security-token: %s", token);
    more = curl_slist_append(*list, line);
    explicit_bzero(line, n);
    free(line);
    if (!more)
        return err_set(err, -ENOMEM, "out of memory");
    *list = more;
    return 0;
}
