/* test_http_conn: the connection table of http/http_conn.c without a daemon: per-address counts
 * (against a plain array, with keys crowded into a small table so that probe runs overlap and
 * deletions shift entries back), admission (the per-address limit, the reserve kept for light
 * clients), and the watcher cutting a connection that is past its head deadline, seen from the
 * other end of a socket pair. */
#include "http/http_conn.c"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include "tests/unit/check.h"

static struct sockaddr_in v4(unsigned host)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(0x7f000000u | host);
    return sa;
}

static void key_of(unsigned host, unsigned char key[16])
{
    struct sockaddr_in sa = v4(host);
    CHECK_INT(addr_key((struct sockaddr *)&sa, key), 0);
}

/* Address number h scattered over 127.0.0.0/8 (consecutive ones would land in consecutive
 * slots, never sharing a probe run). */
static void key_scattered(unsigned h, unsigned char key[16])
{
    key_of((h + 1) * 2654435761u & 0xffffffu, key);
}

/* Adds and removes connections of 40 addresses in a fixed pseudo-random order, at most two each
 * so that slots empty often, with the table held to 64 slots, checking every address's count
 * against a plain array after each step. */
static void test_counts(http_server *s)
{
    unsigned want[40] = {0};
    unsigned char key[16];
    uint32_t x = 12345;
    size_t slots = s->n_addr_slots;

    s->n_addr_slots = 64;

    for (int step = 0; step < 4000; step++) {
        x = x * 1103515245u + 12345u;
        unsigned host = (x >> 8) % 40;
        key_scattered(host, key);
        if (want[host] == 0 || (((x >> 20) & 1) && want[host] < 2)) {
            addr_add(s, key);
            want[host]++;
        } else {
            addr_remove(s, key);
            want[host]--;
        }
        for (unsigned h = 0; h < 40; h++) {
            key_scattered(h, key);
            if (addr_count(s, key) != want[h]) {
                CHECK_INT(addr_count(s, key), want[h]);
                step = 4000;
                break;
            }
        }
    }
    for (unsigned h = 0; h < 40; h++) {
        key_scattered(h, key);
        while (want[h]--)
            addr_remove(s, key);
    }
    for (size_t i = 0; i < slots; i++)
        CHECK_INT(s->addr_slots[i].count, 0);
    s->n_addr_slots = slots;
}

static int admit(http_server *s, unsigned host)
{
    struct sockaddr_in sa = v4(host);
    return http_conn_admit(s, (struct sockaddr *)&sa, sizeof sa) == MHD_YES;
}

/* Opens n connections from host in the table's counts (as the STARTED notification does). */
static void open_from(http_server *s, unsigned host, unsigned n)
{
    unsigned char key[16];
    key_of(host, key);
    for (unsigned i = 0; i < n; i++) {
        addr_add(s, key);
        s->n_conns++;
    }
}

static void test_admission(http_server *s)
{
    /* 64 connections: a reserve of 16 for light clients */
    CHECK_INT(s->max_conns, 64);
    CHECK_INT(s->reserve, 16);
    s->cfg.max_per_client = 20;
    open_from(s, 2, 19);
    CHECK(admit(s, 2));
    open_from(s, 2, 1);
    CHECK(!admit(s, 2)); /* 20 from one address */
    s->cfg.max_per_client = 0;
    CHECK(admit(s, 2));

    open_from(s, 3, 20);
    open_from(s, 4, 7); /* 47 open: heavy addresses still get in */
    CHECK(admit(s, 3));
    open_from(s, 5, 1); /* 48 = 64 - 16: only light ones now */
    CHECK(!admit(s, 3));
    CHECK(!admit(s, 2));
    CHECK(admit(s, 4)); /* 7 open: light */
    CHECK(admit(s, 6)); /* none open */
    open_from(s, 4, 1);
    CHECK(!admit(s, 4)); /* 8 open: heavy now */
}

/* The watcher shuts down a connection whose head deadline has passed, and leaves one that has
 * sent its request head alone. */
static void test_cut(http_server *s)
{
    int late[2], busy[2];
    http_conn c1 = {0}, c2 = {0};
    char b;

    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, late), 0);
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, busy), 0);
    c1.fd = late[0];
    c2.fd = busy[0];
    pthread_mutex_lock(&s->conn_lock);
    wait_append(s, &c1);
    wait_append(s, &c2);
    wait_remove(s, &c2); /* its head came in */
    c1.deadline = http_now() - 1;
    pthread_cond_signal(&s->conn_tick);
    pthread_mutex_unlock(&s->conn_lock);

    struct pollfd p = {.fd = late[1], .events = POLLIN};
    CHECK_INT(poll(&p, 1, 5000), 1);
    CHECK_INT(read(late[1], &b, 1), 0); /* the end: shut down */
    p.fd = busy[1];
    CHECK_INT(poll(&p, 1, 200), 0);
    pthread_mutex_lock(&s->conn_lock);
    CHECK(c1.cut && !c1.waiting && !c2.cut);
    CHECK(s->waiting == NULL && s->waiting_tail == NULL);
    wait_append(s, &c1); /* a cut connection never waits again */
    CHECK(!c1.waiting);
    pthread_mutex_unlock(&s->conn_lock);
    for (int i = 0; i < 2; i++) {
        close(late[i]);
        close(busy[i]);
    }
}

int main(void)
{
    http_server *s = calloc(1, sizeof(*s));

    CHECK(s != NULL);
    if (!s)
        return check_exit();
    CHECK_INT(http_conn_start(s, 64), 0);
    CHECK_INT(s->n_addr_slots, 256);
    test_counts(s);
    test_admission(s);
    test_cut(s);
    http_conn_stop(s);
    free(s);
    return check_exit();
}
