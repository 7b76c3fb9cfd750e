/* Unit tests of util/url: finding, redacting and putting back a URL's userinfo. */
#include "util/url.h"

#include "tests/unit/check.h"

static void check_redact(const char *url, const char *want)
{
    char *got = url_redact(url);
    CHECK_STR(got, want);
    free(got);
}

static void check_set(const char *url, const char *userinfo, const char *want)
{
    char *got = url_userinfo_set(url, userinfo);
    CHECK_STR(got, want);
    free(got);
}

int main(void)
{
    size_t at = 0, len = 0;
    CHECK(url_userinfo_span("https://u:p@h/x", &at, &len));
    CHECK_INT(at, 8);
    CHECK_INT(len, 3);
    CHECK(!url_userinfo_span("https://h/x@y", &at, &len));     /* '@' in the path */
    CHECK(!url_userinfo_span("https://h/x?u=a@b", &at, &len)); /* ... or the query */
    CHECK(!url_userinfo_span("https://h#a@b", &at, &len));     /* ... or the fragment */
    CHECK(!url_userinfo_span("https://@h/x", &at, &len));      /* empty: nothing to hide */
    CHECK(!url_userinfo_span("no-scheme@h", &at, &len));
    CHECK(!url_userinfo_span("/a://u@h", &at, &len));

    check_redact("http://user:pw@host/data.csv", "http://***@host/data.csv");
    check_redact("https://tok%40en@host:8443/d?sig=abc#f", "https://***@host:8443/d?sig=abc#f");
    check_redact("http://user@host", "http://***@host");
    check_redact("http://host/data.csv?X-Amz-Signature=s",
                 "http://host/data.csv?X-Amz-Signature=s");
    check_redact("file:///srv/data.csv", "file:///srv/data.csv");

    check_set("http://***@host/d", "u:p%3A", "http://u:p%3A@host/d");
    check_set("http://host/d", "u:p", "http://u:p@host/d");
    check_set("http://u:p@host/d", NULL, "http://host/d");
    check_set("http://@host/d", "", "http://host/d");
    CHECK(url_userinfo_set("host/d", "u:p") == NULL);

    char *ui = url_userinfo_dup("https://a:b%20c@h/");
    CHECK_STR(ui, "a:b%20c");
    free(ui);
    CHECK(url_userinfo_dup("https://h/") == NULL);
    return check_exit();
}
