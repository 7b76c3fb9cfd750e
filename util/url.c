/* url: userinfo in URLs (see url.h). Pure string work: no decoding, so what is put back is
 * byte for byte what was taken out. */
#include "util/url.h"

#include <stdlib.h>
#include <string.h>

/* The offset of the authority (after "://"); 0 when there is no scheme. */
static size_t url_authority(const char *url)
{
    const char *sep = strstr(url, "://");
    if (!sep || sep == url || strcspn(url, "/?#") < (size_t)(sep - url))
        return 0;
    return (size_t)(sep - url) + 3;
}

int url_userinfo_span(const char *url, size_t *at, size_t *len)
{
    size_t start = url_authority(url);
    if (start == 0)
        return 0;
    size_t authority = strcspn(url + start, "/?#");
    const char *sign = memchr(url + start, '@', authority);
    if (!sign || sign == url + start)
        return 0; /* "scheme://@host" carries nothing to hide */
    *at = start;
    *len = (size_t)(sign - (url + start));
    return 1;
}

char *url_userinfo_set(const char *url, const char *userinfo)
{
    size_t at = url_authority(url), len = 0, add = userinfo ? strlen(userinfo) : 0;
    if (at == 0)
        return NULL;
    size_t cut = url_userinfo_span(url, &at, &len) ? len + 1 : 0; /* with its '@' */
    if (cut == 0 && url[at] == '@')
        cut = 1; /* an empty userinfo */
    char *out = malloc(strlen(url) - cut + add + 2);
    if (!out)
        return NULL;
    memcpy(out, url, at);
    size_t o = at;
    if (add) {
        memcpy(out + o, userinfo, add);
        o += add;
        out[o++] = '@';
    }
    strcpy(out + o, url + at + cut);
    return out;
}

char *url_redact(const char *url)
{
    size_t at, len;
    return url_userinfo_span(url, &at, &len) ? url_userinfo_set(url, URL_REDACTED) : strdup(url);
}

char *url_userinfo_dup(const char *url)
{
    size_t at, len;
    if (!url_userinfo_span(url, &at, &len))
        return NULL;
    return strndup(url + at, len);
}
