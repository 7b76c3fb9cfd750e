/* cmd_download: `trainyard download ID [NAME] [-o PATH]` — one artifact of a job, resumable and
 * checked.
 *
 * The bytes go to PATH.part; only when all of them are there and their SHA-256 equals the one
 * the artifact listing (GET /jobs/{id}/artifacts) gives is PATH.part renamed onto PATH. A
 * PATH.part left by an interrupted run is resumed: its bytes are hashed again and the rest is
 * asked for with "Range: bytes=N-".
 *
 * Invariants: d.have is the number of bytes in PATH.part and d.sha their hash so far. The file
 * starts over (truncated, hash reset) at most once per response, at its first byte, when the
 * answer is a 200 (a server that ignores Range sends everything); a 206 continues at d.have.
 * A PATH.part longer than the artifact, or one whose resumed result does not hash to the
 * listing's SHA-256 (its first bytes were not this artifact's), is downloaded again whole,
 * once: the .part file is this command's scratch space, never the user's data. On a mismatch
 * after that PATH is untouched and PATH.part is removed. Ctrl-C leaves PATH.part to resume
 * from. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_client.h"
#include "util/path.h"
#include "util/err.h"
#include "util/mkdirs.h"
#include "util/sha256.h"

#define DL_TFEVENTS_PREFIX "events.out.tfevents." /* the server's name (scheduler/event_file.h) */
#define DL_ID_MAX          80
#define DL_NAME_MAX        300

static const char download_help[] =
    "usage: trainyard download ID [NAME] [-o PATH] [options]\n"
    "       trainyard download --tensorboard DIR ID... [options]\n"
    "\n"
    "Downloads the artifact NAME of job ID (default model.safetensors) to PATH (default NAME\n"
    "in the current directory; a directory PATH gets NAME inside it, and a PATH that ends\n"
    "in / is such a directory, made when missing). The bytes land in\n"
    "PATH.part first, which a later run resumes (an HTTP Range request); PATH appears only\n"
    "once the SHA-256 matches the server's. A mismatch exits 1 and leaves PATH alone.\n"
    "A progress bar shows on a terminal.\n"
    "\n"
    "With --tensorboard, downloads each job's TensorBoard event file (the artifact\n"
    "events.out.tfevents.<time>.trainyard the server writes when a job ends) into\n"
    "DIR/<job name>-<first 8 characters of its id>/, so that `tensorboard --logdir DIR`\n"
    "shows the jobs as runs side by side.\n"
    "\n"
    "options:\n"
    "  -o, --output PATH   where to write the artifact\n"
    "  --tensorboard DIR   the TensorBoard event files of the jobs ID... into DIR\n";

typedef struct dl {
    const cli_conn *o;
    const char *name;
    FILE *f;
    sha256_ctx sha;
    uint64_t have, size; /* bytes in the file; the artifact's size */
    double drawn_at;     /* when the bar was last drawn */
    int write_errno;
    int answered;     /* the current response's first bytes have arrived */
    int started_over; /* a 200 answered a Range request: the file began again */
} dl;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void dl_draw(dl *d, int last)
{
    double t = now_s();
    if (!d->o->tty || (!last && t - d->drawn_at < 0.1))
        return;
    char bar[31], have[24], size[24];
    double frac = d->size ? (double)d->have / (double)d->size : 1;
    cli_bar(frac, 30, bar);
    cli_size(d->have, have);
    cli_size(d->size, size);
    printf("\r%s [%s] %3.0f%%  %s of %s\033[K%s", d->name, bar, frac * 100, have, size,
           last ? "\n" : "");
    fflush(stdout);
    d->drawn_at = t;
}

/* Empties the .part file: the download starts again from byte 0. */
static int dl_restart(dl *d)
{
    if (fflush(d->f) != 0 || ftruncate(fileno(d->f), 0) != 0 || fseek(d->f, 0, SEEK_SET) != 0)
        return -errno;
    sha256_init(&d->sha);
    d->have = 0;
    return 0;
}

static int dl_sink(void *ctx, long status, const char *data, size_t len)
{
    dl *d = ctx;
    if (!d->answered) {
        d->answered = 1;
        if (status == 200 && d->have > 0) { /* the range was ignored */
            if (dl_restart(d) < 0)
                goto fail;
            d->started_over = 1;
        }
    }
    if (d->have + len > d->size) /* more than the listing said: stop, the check will fail */
        return 1;
    if (fwrite(data, 1, len, d->f) != len)
        goto fail;
    sha256_update(&d->sha, data, len);
    d->have += len;
    dl_draw(d, 0);
    return 0;
fail:
    d->write_errno = errno ? errno : EIO;
    return -EIO;
}

/* Hashes what path already holds into d->sha; d->have is its size. */
static int dl_hash_part(dl *d, const char *part)
{
    char buf[1 << 16];
    size_t n;
    rewind(d->f);
    while ((n = fread(buf, 1, sizeof buf, d->f)) > 0) {
        sha256_update(&d->sha, buf, n);
        d->have += n;
    }
    if (ferror(d->f) || fseek(d->f, 0, SEEK_END) != 0) { /* a write may follow the reads */
        fprintf(stderr, "trainyard download: cannot read %s: %s\n", part, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    return 0;
}

/* Asks for the artifact's bytes from d->have on (all of them when it is 0) and appends them to
 * the .part file; 0 or a CLI exit status, with the reason printed. */
static int dl_get(const cli_conn *o, client *c, const char *id, dl *d, const char *part)
{
    char esc[300], apath[600], full[1200], range[64], err[ERR_LEN];
    long status = 0;
    json_t *reply = NULL;
    cli_escape(d->name, esc, sizeof esc);
    snprintf(apath, sizeof apath, "/artifacts/%s", esc);
    int rc = cli_job_path(o, id, apath, full, sizeof full);
    if (rc != 0)
        return rc;
    if (d->have > 0) {
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)d->have);
        client_next_header(c, range);
    }
    d->answered = 0;
    dl_draw(d, 0);
    rc = client_get_stream(c, full, dl_sink, d, &status, &reply, err);
    if (o->tty && d->drawn_at > 0)
        dl_draw(d, 1);
    if (rc == -EIO && d->write_errno) {
        fprintf(stderr, "trainyard download: writing %s failed: %s\n", part,
                strerror(d->write_errno));
        rc = CLI_EXIT_FAILED;
    } else if (rc < 0) {
        rc = cli_no_answer(o, rc, err);
        if (rc == CLI_EXIT_INTERRUPTED)
            fprintf(stderr,
                    "trainyard download: %s keeps the %llu bytes so far; the same command "
                    "resumes\n",
                    part, (unsigned long long)d->have);
    } else if (status != 200 && status != 206) {
        rc = cli_refused(o, status, reply);
    }
    json_decref(reply);
    return rc;
}

/* Finds name in the job's artifact listing: size and hex SHA-256 into the out parameters. */
static int dl_lookup(const cli_conn *o, client *c, const char *id, const char *name, uint64_t *size,
                     char sha[65])
{
    char path[600];
    json_t *list = NULL;
    int rc = cli_job_path(o, id, "/artifacts", path, sizeof path);
    if (rc == 0)
        rc = cli_get(o, c, path, &list);
    if (rc != 0)
        return rc;
    json_t *arts = json_object_get(list, "artifacts"), *a;
    size_t i;
    rc = CLI_EXIT_FAILED;
    json_array_foreach (arts, i, a) {
        if (strcmp(cli_str(a, "name"), name) != 0)
            continue;
        *size = (uint64_t)json_integer_value(json_object_get(a, "size"));
        snprintf(sha, 65, "%s", cli_str(a, "sha256"));
        rc = 0;
    }
    if (rc != 0) {
        fprintf(stderr, "trainyard download: job %s has no artifact %s (it has:", id, name);
        json_array_foreach (arts, i, a)
            fprintf(stderr, " %s", cli_str(a, "name"));
        fprintf(stderr, "%s)\n", json_array_size(arts) ? "" : " none yet");
    }
    json_decref(list);
    return rc;
}

/* Downloads artifact name of job id to target (through target.part, checked against the
 * listing's SHA-256) and says so (--json: its document; appended to report instead when not
 * NULL); 0 or a CLI exit status, with the reason printed. */
static int dl_file(const cli_conn *o, client *c, const char *id, const char *name,
                   const char *target, json_t *report)
{
    char part[4200], want[65], got[65];
    snprintf(part, sizeof part, "%s.part", target);
    dl d = {.o = o, .name = name};
    int made_part = 0;
    int rc = dl_lookup(o, c, id, name, &d.size, want);
    if (rc != 0)
        goto out;
    made_part = access(part, F_OK) != 0;
    d.f = fopen(part, made_part ? "w+b" : "r+b");
    if (!d.f) {
        fprintf(stderr, "trainyard download: cannot write %s: %s\n", part, strerror(errno));
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    sha256_init(&d.sha);
    rc = dl_hash_part(&d, part);
    if (rc != 0)
        goto out;
    uint64_t resumed = d.have;
    for (;;) {
        if (d.have < d.size) {
            rc = dl_get(o, c, id, &d, part);
            if (rc != 0)
                goto out;
            if (d.started_over)
                resumed = 0;
        }
        uint8_t digest[32];
        sha256_ctx fin = d.sha; /* a copy: a second pass starts from a fresh context anyway */
        sha256_final(&fin, digest);
        sha256_hex(digest, got);
        if (resumed == 0 || (d.have == d.size && strcmp(got, want) == 0))
            break;
        /* The bytes kept from before were not this artifact's first bytes (or the artifact
         * changed since): they cannot be resumed from, so it is fetched whole, once. */
        fprintf(stderr,
                "trainyard download: the %llu bytes already in %s are not the start of %s; "
                "downloading it whole\n",
                (unsigned long long)resumed, part, name);
        if (dl_restart(&d) < 0) {
            fprintf(stderr, "trainyard download: cannot empty %s: %s\n", part, strerror(errno));
            rc = CLI_EXIT_FAILED;
            goto out;
        }
        resumed = 0;
    }
    if (fflush(d.f) != 0 || fsync(fileno(d.f)) != 0) {
        fprintf(stderr, "trainyard download: writing %s failed: %s\n", part, strerror(errno));
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    if (d.have != d.size || strcmp(got, want) != 0) {
        fprintf(stderr,
                "trainyard download: %s does not match the server's artifact (%llu bytes, "
                "sha-256 %s; expected %llu bytes, sha-256 %s); %s was left as it was and %s "
                "removed: run the command again.\n",
                part, (unsigned long long)d.have, got, (unsigned long long)d.size, want, target,
                part);
        unlink(part); /* every byte in it came from this run */
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    if (rename(part, target) != 0) {
        fprintf(stderr, "trainyard download: cannot rename %s to %s: %s\n", part, target,
                strerror(errno));
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    if (o->json || report) {
        json_t *doc =
            json_pack("{s:s, s:s, s:I, s:s, s:I}", "name", name, "path", target, "size",
                      (json_int_t)d.size, "sha256", got, "resumed_from", (json_int_t)resumed);
        if (report) {
            json_object_set_new(doc, "job_id", json_string(id));
            json_array_append(report, doc);
        } else {
            cli_json_print(doc);
        }
        json_decref(doc);
    } else {
        char size[24];
        cli_size(d.size, size);
        printf("%s: %s, sha-256 %s verified%s\n", target, size, got, resumed ? " (resumed)" : "");
    }
    rc = 0;
out:
    if (d.f)
        fclose(d.f);
    if (rc != 0 && made_part && d.have == 0)
        unlink(part); /* nothing came: leave no empty file behind */
    return rc;
}

/* ---- --tensorboard DIR ID... ----------------------------------------------------------- */

/* The run folder of a job: <job name>-<first 8 of its id>, with anything but letters, digits,
 * '.', '_' and '-' in the name made '_' (and no leading '.'), so it is one plain folder name. */
static void dl_run_name(const char *name, const char *id, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < cap && n < 128; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 *p == '_' || *p == '-' || (*p == '.' && n > 0);
        out[n++] = ok ? *p : '_';
    }
    snprintf(out + n, cap - n, "%s%.8s", n ? "-" : "job-", id);
}

/* The job's tfevents artifact (the server names it events.out.tfevents.<time>.trainyard) into
 * name, and the job's id and name; 0 or a CLI exit status, with the reason printed. */
static int dl_find_tfevents(const cli_conn *o, client *c, const char *id, char *name, size_t cap,
                            char *job_id, char *job_name)
{
    char path[600];
    json_t *job = NULL, *list = NULL;
    int rc = cli_job_path(o, id, "", path, sizeof path);
    if (rc == 0)
        rc = cli_get(o, c, path, &job);
    if (rc == 0)
        rc = cli_job_path(o, id, "/artifacts", path, sizeof path);
    if (rc == 0)
        rc = cli_get(o, c, path, &list);
    if (rc != 0) {
        json_decref(job);
        return rc;
    }
    snprintf(job_id, DL_ID_MAX, "%s", cli_str(job, "id"));
    snprintf(job_name, DL_NAME_MAX, "%s", cli_str(job, "name"));
    json_t *a;
    size_t i;
    rc = CLI_EXIT_FAILED;
    json_array_foreach (json_object_get(list, "artifacts"), i, a) {
        const char *n = cli_str(a, "name");
        if (strncmp(n, DL_TFEVENTS_PREFIX, strlen(DL_TFEVENTS_PREFIX)) == 0 && rc != 0) {
            snprintf(name, cap, "%s", n);
            rc = 0;
        }
    }
    if (rc != 0)
        fprintf(stderr,
                "trainyard download: job %s (%s) has no TensorBoard file: the server writes "
                "one when a job that reported an epoch ends, and it is %s\n",
                id, job_name, cli_str(job, "status"));
    json_decref(job);
    json_decref(list);
    return rc;
}

/* Downloads the tfevents artifact of each job in ids into dir/<run>/ (dl_run_name); every job
 * is tried, the first failure's status is returned. */
static int dl_tensorboard(cli_conn *o, const char *dir, char **ids, int n_ids)
{
    char err[ERR_LEN];
    if (mkdirs(dir, 0755, err) < 0) {
        fprintf(stderr, "trainyard download: %s\n", err);
        return CLI_EXIT_FAILED;
    }
    client *c = NULL;
    int rc = cli_conn_open(o, &c), first = 0;
    if (rc != 0)
        return rc;
    json_t *report = o->json ? json_array() : NULL;
    for (int i = 0; i < n_ids; i++) {
        char name[256], job_id[DL_ID_MAX], job_name[DL_NAME_MAX], run[200], folder[4096],
            target[4400];
        rc = dl_find_tfevents(o, c, ids[i], name, sizeof name, job_id, job_name);
        if (rc == 0) {
            dl_run_name(job_name, job_id, run, sizeof run);
            char why[ERR_LEN];
            if (path_join(folder, sizeof folder, dir, run, why) < 0 ||
                path_join(target, sizeof target, folder, name, why) < 0) {
                fprintf(stderr, "trainyard download: %s\n", why);
                rc = CLI_EXIT_FAILED;
            } else if (mkdir(folder, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "trainyard download: cannot make the folder %s: %s\n", folder,
                        strerror(errno));
                rc = CLI_EXIT_FAILED;
            }
        }
        if (rc == 0)
            rc = dl_file(o, c, job_id, name, target, report);
        if (rc != 0 && first == 0)
            first = rc;
    }
    if (report) {
        cli_json_print(report);
        json_decref(report);
    } else if (first == 0) {
        printf("view them side by side: tensorboard --logdir %s\n", dir);
    }
    client_free(c);
    return first;
}

int cmd_download(int argc, char **argv)
{
    cli_conn o;
    const char *id = NULL, *name = NULL, *out = NULL, *tb_dir = NULL;
    /* The words that are not options, gathered at the front of argv (each moves to an index
     * at or before its own, so none is overwritten before it is read). */
    char **words = argv + 1;
    int n_words = 0;
    cli_conn_init(&o, "download");
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        int taken = cli_common_word(&o, download_help, argc, argv, &i);
        if (taken < 0)
            return CLI_EXIT_USAGE;
        if (taken == 2)
            return 0;
        if (taken)
            continue;
        if (!strcmp(w, "-o") || !strcmp(w, "--output")) {
            if (i + 1 >= argc)
                return cli_usage_error(&o, "a path is needed after", w);
            out = argv[++i];
        } else if (!strcmp(w, "--tensorboard")) {
            if (i + 1 >= argc)
                return cli_usage_error(&o, "a folder is needed after", w);
            tb_dir = argv[++i];
        } else if (w[0] == '-' && w[1]) {
            return cli_usage_error(&o, "unknown option", w);
        } else {
            words[n_words++] = argv[i];
        }
    }
    if (tb_dir) {
        if (n_words == 0) {
            fprintf(stderr, "trainyard download: say which jobs: their IDs (try --help)\n");
            return CLI_EXIT_USAGE;
        }
        if (out)
            return cli_usage_error(&o, "--tensorboard names the folder; leave out", "--output");
        return dl_tensorboard(&o, tb_dir, words, n_words);
    }
    if (n_words > 2)
        return cli_usage_error(&o, "unexpected argument", words[2]);
    id = n_words > 0 ? words[0] : NULL;
    name = n_words > 1 ? words[1] : NULL;
    if (!id) {
        fprintf(stderr, "trainyard download: say which job: its ID (try --help)\n");
        return CLI_EXIT_USAGE;
    }
    if (!name)
        name = "model.safetensors";
    if (strchr(name, '/') || name[0] == '.') {
        fprintf(stderr, "trainyard download: '%s' is not an artifact name\n", name);
        return CLI_EXIT_USAGE;
    }

    char target[4096];
    struct stat st;
    size_t out_len = out ? strlen(out) : 0;
    char err[ERR_LEN];
    if (out_len > 0 && out[out_len - 1] == '/' && mkdirs(out, 0755, err) < 0) {
        fprintf(stderr, "trainyard download: %s\n", err);
        return 1;
    }
    if (!out)
        snprintf(target, sizeof target, "%s", name);
    else if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(target, sizeof target, "%s%s%s", out, out[out_len - 1] == '/' ? "" : "/", name);
    else
        snprintf(target, sizeof target, "%s", out);

    client *c = NULL;
    int rc = cli_conn_open(&o, &c);
    if (rc != 0)
        return rc;
    rc = dl_file(&o, c, id, name, target, NULL);
    client_free(c);
    return rc;
}
