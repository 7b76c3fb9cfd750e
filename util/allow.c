/* allow: host patterns and private addresses, as promised in allow.h.
 *
 * Every address is handled in one 16-byte form: IPv4 becomes its IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d), so that a CIDR, an address pattern and the private ranges each need one
 * comparison, and a mapped address a resolver hands back is judged as the IPv4 one it is. An
 * IPv4 CIDR's prefix length is stored plus 96 for the same reason. */
#include "util/array.h"
#include "util/allow.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"

#define ALLOW_MAX_PATTERN 255

/* Parses an IPv4 or IPv6 literal (brackets and a %zone allowed) into the 16-byte form; 1 when
 * it is one, with *v4 set for IPv4. */
static int allow_parse_ip(const char *s, uint8_t out[16], int *v4)
{
    char buf[ALLOW_MAX_PATTERN + 1];
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (n == 0 || n > ALLOW_MAX_PATTERN)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *zone = strchr(buf, '%');
    if (zone)
        *zone = '\0';
    struct in_addr a4;
    if (!zone && inet_pton(AF_INET, buf, &a4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a4, 4);
        *v4 = 1;
        return 1;
    }
    if (inet_pton(AF_INET6, buf, out) == 1) {
        *v4 = 0;
        return 1;
    }
    return 0;
}

/* Whether a and b agree on their first bits bits. */
static int allow_prefix_eq(const uint8_t a[16], const uint8_t b[16], int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)whole) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* Parses one pattern of n bytes at s into p. */
static int allow_parse_one(const char *s, size_t n, allow_pattern *p, char *err)
{
    char buf[ALLOW_MAX_PATTERN + 1];
    if (n > ALLOW_MAX_PATTERN)
        return err_set(err, -EINVAL, "--dataset-allow pattern '%.40s...' is too long", s);
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *slash = strchr(buf, '/');
    int v4 = 0;
    memset(p, 0, sizeof *p);
    if (slash) {
        *slash = '\0';
        char *end = NULL;
        errno = 0;
        long bits = strtol(slash + 1, &end, 10);
        if (!allow_parse_ip(buf, p->net, &v4) || end == slash + 1 || *end || errno || bits < 0 ||
            bits > (v4 ? 32 : 128)) {
            *slash = '/';
            return err_set(err, -EINVAL,
                           "--dataset-allow: '%s' is not a CIDR block; write it like 10.0.0.0/8 "
                           "or fd00::/8",
                           buf);
        }
        p->kind = ALLOW_NET;
        p->bits = (int)bits + (v4 ? 96 : 0);
        return 0;
    }
    if (allow_parse_ip(buf, p->net, &v4)) {
        p->kind = ALLOW_NET;
        p->bits = 128;
        return 0;
    }
    size_t len = strlen(buf);
    if (len > 1 && buf[len - 1] == '.')
        buf[--len] = '\0';
    const char *name = buf;
    p->kind = ALLOW_NAME;
    if (buf[0] == '*') {
        if (buf[1] != '.' || buf[2] == '\0')
            return err_set(err, -EINVAL,
                           "--dataset-allow: '%s' is not a pattern; a wildcard is written "
                           "*.example.com",
                           buf);
        p->kind = ALLOW_SUFFIX;
        name = buf + 1;
    }
    for (const char *c = p->kind == ALLOW_SUFFIX ? name + 1 : name; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '.' && *c != '_')
            return err_set(err, -EINVAL,
                           "--dataset-allow: '%s' is not a host name, address or CIDR block", buf);
    }
    if (!*name)
        return err_set(err, -EINVAL, "--dataset-allow: empty pattern");
    p->name = strdup(name);
    if (!p->name)
        return err_set(err, -ENOMEM, "out of memory");
    for (char *c = p->name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return 0;
}

int allow_list_parse(const char *spec, allow_list *out, char *err)
{
    allow_list l = {0};
    int rc = 0;
    size_t cap = 0;
    const char *s = spec ? spec : "";
    while (*s) {
        size_t n = strcspn(s, ",");
        const char *a = s, *b = s + n;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        s += n + (s[n] == ',');
        if (a == b)
            continue; /* "a,,b" and a trailing comma are harmless */
        if (ARRAY_GROW(l.p, cap, l.n + 1, ARRAY_NO_MAX) < 0) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        rc = allow_parse_one(a, (size_t)(b - a), &l.p[l.n], err);
        if (rc < 0)
            goto out;
        l.n++;
    }
    *out = l;
    l.p = NULL;
    l.n = 0;
out:
    allow_list_free(&l);
    return rc;
}

void allow_list_free(allow_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->p[i].name);
    free(l->p);
    l->p = NULL;
    l->n = 0;
}

/* Whether the 16-byte address a matches an ALLOW_NET pattern of l. */
static int allow_match_net(const allow_list *l, const uint8_t a[16])
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->p[i].kind == ALLOW_NET && allow_prefix_eq(a, l->p[i].net, l->p[i].bits))
            return 1;
    }
    return 0;
}

int allow_list_match_host(const allow_list *l, const char *host)
{
    uint8_t a[16];
    int v4 = 0;
    if (!host || !*host)
        return 0;
    if (allow_parse_ip(host, a, &v4))
        return allow_match_net(l, a);
    size_t n = strlen(host);
    if (n > 1 && host[n - 1] == '.')
        n--;
    for (size_t i = 0; i < l->n; i++) {
        const allow_pattern *p = &l->p[i];
        size_t m = p->name ? strlen(p->name) : 0;
        if (p->kind == ALLOW_NAME && n == m && strncasecmp(host, p->name, n) == 0)
            return 1;
        /* ".example.com" needs at least one label in front of it. */
        if (p->kind == ALLOW_SUFFIX && n > m && strncasecmp(host + n - m, p->name, m) == 0)
            return 1;
    }
    return 0;
}

/* The 16-byte form of sa; 0 for a family other than AF_INET / AF_INET6. */
static int allow_sockaddr(const struct sockaddr *sa, uint8_t a[16])
{
    if (sa->sa_family == AF_INET) {
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

int allow_list_match_addr(const allow_list *l, const struct sockaddr *sa)
{
    uint8_t a[16];
    return allow_sockaddr(sa, a) && allow_match_net(l, a);
}

int allow_addr_is_private(const struct sockaddr *sa)
{
    static const struct {
        const char *net;
        int bits; /* over the 16-byte form */
    } ranges[] = {
        {"::ffff:0.0.0.0", 96 + 8},
        {"::ffff:10.0.0.0", 96 + 8},
        {"::ffff:100.64.0.0", 96 + 10},
        {"::ffff:127.0.0.0", 96 + 8},
        {"::ffff:169.254.0.0", 96 + 16},
        {"::ffff:172.16.0.0", 96 + 12},
        {"::ffff:192.168.0.0", 96 + 16},
        {"::ffff:224.0.0.0", 96 + 4},
        {"::ffff:255.255.255.255", 128},
        {"::", 128},
        {"::1", 128},
        {"fc00::", 7},
        {"fe80::", 10},
        {"ff00::", 8},
    };
    uint8_t a[16], net[16];
    if (!allow_sockaddr(sa, a))
        return 1; /* not an IP socket: nothing a dataset download should open */
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (inet_pton(AF_INET6, ranges[i].net, net) == 1 && allow_prefix_eq(a, net, ranges[i].bits))
            return 1;
    }
    return 0;
}

void allow_addr_str(const struct sockaddr *sa, char *buf)
{
    uint8_t a[16];
    buf[0] = '\0';
    if (!allow_sockaddr(sa, a)) {
        snprintf(buf, ALLOW_ADDR_LEN, "(family %d)", sa->sa_family);
        return;
    }
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a, mapped, 12) == 0)
        inet_ntop(AF_INET, a + 12, buf, ALLOW_ADDR_LEN);
    else
        inet_ntop(AF_INET6, a, buf, ALLOW_ADDR_LEN);
}
