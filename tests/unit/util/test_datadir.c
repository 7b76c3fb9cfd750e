/* Unit tests of util/datadir: every builder's path, -ENAMETOOLONG at the edge, and the layout
 * against docs/OPERATIONS.md: the first column of its data-directory table must list the
 * module's patterns, in order, so that neither side changes alone. */
#include "util/datadir.h"

#include <errno.h>

#include "tests/unit/check.h"

/* pattern with "<job id>" and "<sha256>" as id, "worker-N" as worker-<slot>, and no trailing
 * '/'. */
static void pattern_fill(const char *pattern, const char *id, int slot, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pattern; *p && n + 16 < cap;) {
        if (!strncmp(p, "<job id>", 8)) {
            n += (size_t)snprintf(out + n, cap - n, "%s", id);
            p += 8;
        } else if (!strncmp(p, "<sha256>", 8)) {
            n += (size_t)snprintf(out + n, cap - n, "%s", id);
            p += 8;
        } else if (!strncmp(p, "worker-N", 8)) {
            n += (size_t)snprintf(out + n, cap - n, "worker-%d", slot);
            p += 8;
        } else {
            out[n++] = *p++;
        }
    }
    if (n > 0 && out[n - 1] == '/')
        n--;
    out[n] = '\0';
}

/* 1 when path is "/d/" followed by one of the layout's patterns, filled in. */
static int in_layout(const char *path, const char *id, int slot)
{
    size_t n = 0;
    const datadir_row *rows = datadir_layout(&n);
    char want[512];
    if (strncmp(path, "/d/", 3) != 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        pattern_fill(rows[i].pattern, id, slot, want, sizeof want);
        if (!strcmp(path + 3, want))
            return 1;
    }
    return 0;
}

static void check_builders(void)
{
    char out[DATADIR_PATH_MAX], artifacts[DATADIR_PATH_MAX], work[DATADIR_PATH_MAX];
    const datadir_entry files[] = {DATADIR_DB,  DATADIR_ADMIN_TOKEN, DATADIR_CREDENTIALS_KEY,
                                   DATADIR_TMP, DATADIR_SERVER_CERT, DATADIR_SERVE_LOCK};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        CHECK_INT(datadir_path("/d", files[i], out), 0);
        if (!in_layout(out, "", 0))
            fprintf(stderr, "not in the layout: %s\n", out);
        CHECK(in_layout(out, "", 0));
    }
    CHECK_INT(datadir_path("/d", DATADIR_DB, out), 0);
    CHECK_STR(out, "/d/trainyard.db");
    CHECK_INT(datadir_path("/d", (datadir_entry)99, out), -EINVAL);

    CHECK_INT(datadir_path("/d", DATADIR_ARTIFACTS, artifacts), 0);
    CHECK_INT(datadir_job_dir(artifacts, "j1", out), 0);
    CHECK(in_layout(out, "j1", 0));
    CHECK_INT(datadir_job_checkpoint(artifacts, "j1", out), 0);
    CHECK_STR(out, "/d/artifacts/j1/.checkpoint");
    CHECK(in_layout(out, "j1", 0));
    CHECK_INT(datadir_job_file(artifacts, "j1", "model.safetensors", out), 0);
    CHECK_STR(out, "/d/artifacts/j1/model.safetensors");

    CHECK_INT(datadir_code_file("/d", "ab12", out), 0);
    CHECK_STR(out, "/d/code/ab12.tar.gz");
    CHECK(in_layout(out, "ab12", 0));
    CHECK_INT(datadir_path("/d", DATADIR_CODE, out), 0);
    CHECK_STR(out, "/d/code");

    CHECK_INT(datadir_path("/d", DATADIR_WORK, work), 0);
    CHECK_INT(datadir_worker_dir(work, 3, out), 0);
    CHECK_STR(out, "/d/work/worker-3");
    CHECK(in_layout(out, "", 3));

    CHECK_INT(datadir_beside("/d/server-cert.pem", ".tmp", out), 0);
    CHECK_STR(out, "/d/server-cert.pem.tmp");
}

/* A root that leaves exactly room for "/tmp" fits; one byte more does not, and the output is
 * an empty string, never a cut-off path. */
static void check_too_long(void)
{
    static char root[DATADIR_PATH_MAX + 8], out[DATADIR_PATH_MAX];
    size_t len = DATADIR_PATH_MAX - 1 - strlen("/tmp");
    memset(root, 'r', len);
    root[len] = '\0';
    CHECK_INT(datadir_path(root, DATADIR_TMP, out), 0);
    CHECK_INT(strlen(out), DATADIR_PATH_MAX - 1);
    root[len] = 'r';
    root[len + 1] = '\0';
    CHECK_INT(datadir_path(root, DATADIR_TMP, out), -ENAMETOOLONG);
    CHECK_STR(out, "");
    CHECK_INT(datadir_job_file(root, "j", "n", out), -ENAMETOOLONG);
    CHECK_INT(datadir_job_checkpoint(root, "j", out), -ENAMETOOLONG);
    CHECK_INT(datadir_worker_dir(root, 1, out), -ENAMETOOLONG);
    CHECK_INT(datadir_beside(root, ".part", out), -ENAMETOOLONG);
}

/* The first column of the table under "## The data directory" in docs/OPERATIONS.md: each
 * row's first `quoted` text, in order, into rows; returns the count. */
static size_t doc_patterns(char rows[][128], size_t max)
{
    const char *root = getenv("TRAINYARD_SOURCE_ROOT");
    char path[1024], line[2048];
    size_t n = 0;
    int in_section = 0, in_table = 0;
    snprintf(path, sizeof path, "%s/docs/OPERATIONS.md", root ? root : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot read %s (TRAINYARD_SOURCE_ROOT)\n", path);
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3)) {
            in_section = !strcmp(line, "## The data directory\n");
            continue;
        }
        if (!in_section)
            continue;
        if (line[0] != '|') {
            if (in_table)
                break; /* the first table only */
            continue;
        }
        in_table = 1;
        if (!strncmp(line, "| path", 6) || !strncmp(line, "| ---", 5))
            continue;
        char *open = strchr(line, '`'), *close = open ? strchr(open + 1, '`') : NULL;
        char *bar = strchr(line + 1, '|');
        if (!open || !close || (bar && close > bar) || n == max) {
            fprintf(stderr, "OPERATIONS.md: a row without a `path` first: %s", line);
            rows[n < max ? n++ : n - 1][0] = '\0';
            continue;
        }
        snprintf(rows[n++], 128, "%.*s", (int)(close - open - 1), open + 1);
    }
    fclose(f);
    return n;
}

static void check_doc(void)
{
    char doc[32][128];
    size_t n_doc = doc_patterns(doc, 32), n = 0;
    const datadir_row *rows = datadir_layout(&n);
    CHECK(n > 0);
    CHECK_INT(n_doc, n);
    for (size_t i = 0; i < n && i < n_doc; i++)
        CHECK_STR(doc[i], rows[i].pattern);
    for (size_t i = 0; i < n; i++)
        CHECK(rows[i].what && rows[i].what[0]);
}

int main(void)
{
    check_builders();
    check_too_long();
    check_doc();
    return check_exit();
}
