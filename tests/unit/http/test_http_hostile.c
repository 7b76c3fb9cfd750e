/* test_http_hostile: requests no client library would send, written to a raw socket of a real
 * server on a loopback port (no version, an unknown method, bad escapes, an absolute URI,
 * invalid UTF-8, a huge header, a huge path), and the server still serving after them. */
#include "tests/unit/http/http_test.h"

static int raw_request(const char *data, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port(srv))};
    struct timeval tv = {5, 0};
    char buf[256];
    ssize_t n;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        for (size_t off = 0; off < len;) {
            n = send(fd, data + off, len - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            status = 0;
            sscanf(buf, "HTTP/1.%*d %d", &status);
        } else if (n == 0 || errno == ECONNRESET) {
            status = 0;
        }
    }
    close(fd);
    return status;
}

static void test_hostile(void)
{
    static char huge[100000];
    int st;

    st = raw_request("GARBAGE\r\n\r\n", 11);
    CHECK(st == 0 ||
          (st >= 400 && st < 500)); /* libmicrohttpd closes on a line without a version */
    st = raw_request("FOO /echo/a/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 37);
    CHECK_INT(st, 405);
    st = raw_request("GET /echo/%%%%/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 41);
    CHECK_INT(st, 404);
    st = raw_request("GET http://x/echo/a/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 46);
    CHECK_INT(st, 200);
    st = raw_request("GET /echo/\xff\xfe/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 38);
    CHECK(st == 404 || st == 400);

    memcpy(huge, "GET /file HTTP/1.1\r\nHost: x\r\nX-Big: ", 36);
    memset(huge + 36, 'a', sizeof(huge) - 40);
    memcpy(huge + sizeof(huge) - 4, "\r\n\r\n", 4);
    st = raw_request(huge, sizeof(huge));
    CHECK(st == 0 || st == 431 || st == 413);

    memset(huge, '/', sizeof(huge));
    memcpy(huge, "GET ", 4);
    memcpy(huge + sizeof(huge) - 15, " HTTP/1.1\r\n\r\n", 13);
    st = raw_request(huge, sizeof(huge) - 2);
    CHECK(st == 0 || st == 414 || st == 431 || st == 413 || st == 400);

    /* still serving */
    resp r;
    get("/echo/a/x/b", &r);
    CHECK_INT(r.status, 200);
    resp_free(&r);
}

int main(void)
{
    if (http_test_begin() < 0)
        return check_exit();
    test_hostile();
    http_test_end();
    return check_exit();
}
