/* allow: the --dataset-allow host patterns and the private-address rule that fetch enforces.
 *
 * A list is written as patterns separated by commas (spaces around them are ignored). Forms:
 *   data.example.com   that host name exactly (names compare case-insensitively, a trailing dot
 *                      is ignored)
 *   *.example.com      any subdomain of example.com, not example.com itself
 *   127.0.0.1, ::1     that IPv4 or IPv6 address
 *   10.0.0.0/8         any address in that CIDR block (IPv4 or IPv6, e.g. fd00::/8)
 * IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are compared as the IPv4 address they carry.
 *
 * Private addresses: IPv4 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.168/16 and
 * multicast 224/4; IPv6 ::, ::1, fc00::/7, fe80::/10, multicast ff00::/8, and the IPv4-mapped
 * forms of the IPv4 ranges.
 *
 * Ownership: allow_list_parse fills a list that allow_list_free releases; free accepts a zeroed
 * list. */
#ifndef TRAINYARD_WORKER_ALLOW_H
#define TRAINYARD_WORKER_ALLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ALLOW_ADDR_LEN 46 /* INET6_ADDRSTRLEN */

typedef struct allow_pattern {
    int kind;        /* ALLOW_NAME, ALLOW_SUFFIX or ALLOW_NET */
    char *name;      /* lowercased; for ALLOW_SUFFIX the part after "*" (".example.com") */
    uint8_t net[16]; /* ALLOW_NET: the address, IPv4 as IPv4-mapped IPv6 */
    int bits;        /* ALLOW_NET: prefix length over the 128-bit form */
} allow_pattern;

enum { ALLOW_NAME = 1, ALLOW_SUFFIX, ALLOW_NET };

typedef struct allow_list {
    allow_pattern *p;
    size_t n;
} allow_list;

/* Parses a comma-separated pattern list (NULL or "" gives an empty list); -EINVAL with the bad
 * pattern named in err, -ENOMEM. */
int allow_list_parse(const char *spec, allow_list *out, char *err);
/* Frees a parsed list; accepts a zeroed one. */
void allow_list_free(allow_list *l);
/* Whether a URL host (a name, an IPv4 literal or an IPv6 literal with or without brackets)
 * matches a pattern of l. */
int allow_list_match_host(const allow_list *l, const char *host);
/* Whether the address sa (AF_INET or AF_INET6) matches an address or CIDR pattern of l. */
int allow_list_match_addr(const allow_list *l, const struct sockaddr *sa);
/* Whether sa is private, loopback, link-local, unspecified, multicast or CGNAT (see above). */
int allow_addr_is_private(const struct sockaddr *sa);
/* Writes sa as text into buf[ALLOW_ADDR_LEN]. */
void allow_addr_str(const struct sockaddr *sa, char *buf);

#endif
