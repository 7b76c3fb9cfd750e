/* http_min: the reference for bench/service.sh's GET /jobs/{id} figure — the least a
 * libmicrohttpd server can do per request: answer every request with one fixed JSON body the
 * size of a job, from a thread pool of the same size and the same polling mode as
 * `trainyard serve`. Whatever trainyard does beyond this (routing, SQLite, JSON) is its cost.
 *
 * usage: http-min [PORT] [THREADS]   (prints "listening on PORT"; stops on SIGINT/SIGTERM) */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char body[1400];
static size_t body_len;

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    /* The first call only sees the headers: answering then makes libmicrohttpd close the
     * connection after the response. Answer on the second call, as trainyard does. */
    static int seen;
    if (!*state) {
        *state = &seen;
        return MHD_YES;
    }
    /* One response per request, as trainyard makes them: a response shared by every thread
     * would serialise them on its lock and make the reference slower than it need be. */
    struct MHD_Response *response =
        MHD_create_response_from_buffer(body_len, body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return ret;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    unsigned port = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
    /* A body shaped and sized like a job document as GET /jobs/{id} returns it. */
    int n = snprintf(body, sizeof body,
                     "{\"id\":\"0123456789abcdef0123456789abcdef\","
                     "\"name\":\"bench\",\"status\":\"queued\",\"document\":{");
    while (n < (int)sizeof body - 40)
        n += snprintf(body + n, sizeof body - (size_t)n, "\"k%d\":%d,", n, n);
    snprintf(body + n - 1, sizeof body - (size_t)n + 1, "}}");
    body_len = strlen(body);
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL,
                         NULL, answer, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "http-min: cannot listen on port %u\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on %u\n", info ? info->port : port);
    fflush(stdout);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop)
        pause();
    MHD_stop_daemon(d);
    return 0;
}
