/* test_cli_client: the text helpers the client commands share (cli/cli_client.c): the stream
 * line splitter (lines across pieces, CRLF, a last line without its newline, an early stop, a
 * line past CLI_LINE_MAX cut there, a dropped partial line),
 * URL escaping, API times, durations, sizes and the progress bar. */
#include "cli/cli_client.c"

#include "tests/unit/check.h"

typedef struct seen {
    char text[256];
    int lines, stop_at;
} seen;

static int on_line(void *ctx, const char *line, size_t len)
{
    seen *s = ctx;
    CHECK_INT(strlen(line), len); /* NUL-terminated at len */
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "[%s]", line);
    s->lines++;
    return s->lines == s->stop_at ? 7 : 0;
}

static void test_lines(void)
{
    seen s = {0};
    cli_lines l = {.fn = on_line, .ctx = &s};
    const char *pieces[] = {"event: st", "atus\r\ndata: {}\n", "\n", ": keep", "-alive\nlast"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        CHECK_INT(cli_lines_feed(&l, pieces[i], strlen(pieces[i])), 0);
    CHECK_STR(s.text, "[event: status][data: {}][][: keep-alive]");
    CHECK_INT(cli_lines_end(&l), 0);
    CHECK_STR(s.text, "[event: status][data: {}][][: keep-alive][last]");
    CHECK_INT(cli_lines_end(&l), 0); /* nothing left */
    CHECK_INT(s.lines, 5);
    cli_lines_free(&l);

    seen t = {.stop_at = 2};
    cli_lines m = {.fn = on_line, .ctx = &t};
    CHECK_INT(cli_lines_feed(&m, "\na\nb\n", 5), 7); /* an empty first line, then the stop */
    CHECK_STR(t.text, "[][a]");
    cli_lines_free(&m);
    cli_lines_free(&m); /* twice is fine */
}

typedef struct sizes {
    size_t len[4];
    char last[8];
    int lines;
} sizes;

static int on_size(void *ctx, const char *line, size_t len)
{
    sizes *z = ctx;
    CHECK_INT(strlen(line), len);
    if (z->lines < 4)
        z->len[z->lines] = len;
    snprintf(z->last, sizeof z->last, "%s", len < sizeof z->last ? line : "");
    z->lines++;
    return 0;
}

static void test_long_lines(void)
{
    sizes z = {0};
    cli_lines l = {.fn = on_size, .ctx = &z};
    size_t n = CLI_LINE_MAX + 9;
    char *big = malloc(n);
    CHECK(big != NULL);
    memset(big, 'x', n);
    memcpy(big + n - 5, "ab\r\n", 4); /* the tail of the cut line: "x...xab\r\n" */
    CHECK_INT(cli_lines_feed(&l, big, n - 1), 0);
    CHECK_INT(z.lines, 2);
    CHECK_INT(z.len[0], CLI_LINE_MAX - 1); /* cut at the cap, no byte lost */
    CHECK_INT(z.len[1], n - 1 - 2 - (CLI_LINE_MAX - 1));
    CHECK_STR(z.last, "xxxxxab"); /* the CR is dropped */
    CHECK_INT(cli_lines_feed(&l, "par", 3), 0);
    cli_lines_reset(&l); /* a reconnect: the partial line is gone */
    CHECK_INT(cli_lines_feed(&l, "tial\n", 5), 0);
    CHECK_STR(z.last, "tial");
    CHECK_INT(cli_lines_end(&l), 0);
    CHECK_INT(z.lines, 3);
    cli_lines_free(&l);
    free(big);
}

static void test_text(void)
{
    char out[64], small[8];
    CHECK_INT(cli_escape("a b/c?d=é~", out, sizeof out), 0);
    CHECK_STR(out, "a%20b%2Fc%3Fd%3D%C3%A9~");
    CHECK_INT(cli_escape("abcdefgh", small, sizeof small), -ENAMETOOLONG);

    CHECK_NEAR(cli_time("1970-01-02T00:00:01.500Z"), 86401.5, 1e-9);
    CHECK(cli_time("yesterday") < 0);
    CHECK(cli_time(NULL) < 0);

    char d[24];
    cli_duration(0.214, d);
    CHECK_STR(d, "0.21s");
    cli_duration(42.04, d);
    CHECK_STR(d, "42.0s");
    cli_duration(184, d);
    CHECK_STR(d, "3m04s");
    cli_duration(7500, d);
    CHECK_STR(d, "2h05m");
    cli_duration(-1, d);
    CHECK_STR(d, "0.00s");

    cli_size(512, d);
    CHECK_STR(d, "512 B");
    cli_size(3u << 20, d);
    CHECK_STR(d, "3.0 MiB");

    char bar[11];
    cli_bar(0.5, 10, bar);
    CHECK_STR(bar, "#####-----");
    cli_bar(2, 10, bar);
    CHECK_STR(bar, "##########");
    cli_bar(-1, 10, bar);
    CHECK_STR(bar, "----------");

    json_t *e = json_pack("{s:i, s:f, s:f, s:n, s:n}", "epoch", 3, "loss", 0.41, "accuracy", 0.88,
                          "val_loss", "val_accuracy");
    cli_metrics_text(e, out, sizeof out);
    CHECK_STR(out, "loss 0.4100 acc 0.8800");
    json_decref(e);
    e = json_pack("{s:i, s:n, s:f, s:f, s:n, s:f}", "epoch", 2, "loss", "val_accuracy", 0.5,
                  "top5/acc", 0.93, "gap", "seconds", 1.5);
    cli_metrics_text(e, out, sizeof out);
    CHECK_STR(out, "val_acc 0.5000 top5/acc 0.93");
    char tight[12];
    cli_metrics_text(e, tight, sizeof tight);
    CHECK_STR(tight, "val_acc 0.5");
    json_decref(e);
}

int main(void)
{
    test_lines();
    test_long_lines();
    test_text();
    return check_exit();
}
