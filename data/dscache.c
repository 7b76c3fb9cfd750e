/* dscache: the dataset cache, as promised in dscache.h.
 *
 * Files in the folder: <key>.data and <key>.json per entry (key: 64 hex digits), tmp.* while
 * one is being written, and "lock", the flock that orders every change. Readers take no lock:
 * they read <key>.json, then <key>.data, and check the bytes against the sizes and digest the
 * json gives. A writer writes both files under temporary names without the lock (a download
 * can be large), then, holding it, evicts what must go and renames data, then json, into
 * place. A reader that meets a json and a data of different entries (it read between a
 * writer's two renames) sees a mismatch; it takes the lock, finds the json changed and reads
 * again. Under the lock, a data without its json or a json without its data is a crash's
 * leftover and is removed, as is a temporary file untouched for TMP_STALE_S.
 *
 * Invariants: under the lock, every <key>.json names a <key>.data of its size (or the entry is
 * being removed); the sum of the entries' sizes stays at most the cap after each put. */
#include "data/dscache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/array.h"
#include "util/path.h"
#include "util/err.h"
#include "util/mkdirs.h"
#include "util/sha256.h"
#include "util/timeutil.h"

#define META_MAX    (16u << 10) /* a <key>.json is far smaller */
#define TMP_STALE_S 3600        /* a temporary file untouched this long was left by a crash */
#define KEY_LEN     64

struct dscache {
    char *dir;
    uint64_t cap;
    unsigned seq; /* tells this process's temporary files apart */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return s[n] == '\0';
}

int dscache_default_dir(char *dir, size_t cap)
{
    const char *env = getenv("TRAINYARD_DATASET_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(dir, cap, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(dir, cap, "%s/trainyard/datasets", xdg);
    else if (home && *home)
        n = snprintf(dir, cap, "%s/.cache/trainyard/datasets", home);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* mkdir -p dir (mode 0700: the bytes may be private datasets), and writable. */
static int make_dirs(const char *dir, char *err)
{
    int rc = mkdirs(dir, 0700, err);
    if (rc < 0)
        return rc;
    if (access(dir, W_OK | X_OK) != 0)
        return err_set(err, -errno, "cannot write the dataset cache folder %s: %s", dir,
                       strerror(errno));
    return 0;
}

int dscache_open(const char *dir, uint64_t max_bytes, dscache **out, char *err)
{
    if (!dir || !*dir)
        return err_set(err, -EINVAL, "no dataset cache folder given");
    int rc = make_dirs(dir, err);
    if (rc < 0)
        return rc;
    dscache *c = calloc(1, sizeof *c);
    if (c)
        c->dir = strdup(dir);
    if (!c || !c->dir) {
        free(c);
        return err_set(err, -ENOMEM, "out of memory");
    }
    c->cap = max_bytes ? max_bytes : DSCACHE_DEFAULT_BYTES;
    *out = c;
    return 0;
}

void dscache_free(dscache *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c);
}

const char *dscache_dir(const dscache *c)
{
    return c->dir;
}

uint64_t dscache_cap(const dscache *c)
{
    return c->cap;
}

void dscache_key(const char *url, const char *sha256, char key[65])
{
    static const char tag[] = "trainyard dataset cache 1";
    sha256_ctx h;
    uint8_t d[32];
    sha256_init(&h);
    sha256_update(&h, tag, sizeof tag); /* with its NUL, as each part below */
    if (sha256) {
        char lower[65] = "";
        size_t n = strlen(sha256);
        for (size_t i = 0; i < n && i < 64; i++)
            lower[i] = (char)tolower((unsigned char)sha256[i]);
        sha256_update(&h, "sha256", 7);
        sha256_update(&h, lower, strlen(lower) + 1);
    } else {
        sha256_update(&h, "url", 4);
    }
    sha256_update(&h, url, strlen(url) + 1);
    sha256_final(&h, d);
    sha256_hex(d, key);
}

/* <dir>/<key>.<ext> into path[PATH_MAX]. */
static int entry_path(const dscache *c, const char *key, const char *ext, char *path, char *err)
{
    if (snprintf(path, PATH_MAX, "%s/%s.%s", c->dir, key, ext) >= PATH_MAX)
        return err_set(err, -ENAMETOOLONG, "dataset cache folder %s: path too long", c->dir);
    return 0;
}

/* Takes the folder's lock (blocking); the descriptor, or a negative code. */
static int lock_take(const dscache *c, char *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/lock", c->dir) >= (int)sizeof path)
        return err_set(err, -ENAMETOOLONG, "dataset cache folder %s: path too long", c->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return err_set(err, -e, "cannot lock %s: %s", path, strerror(e));
        }
    }
    return fd;
}

static void lock_release(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock */
}

/* Reads a whole small file into buf[cap] (NUL-terminated); its length or a negative code. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    for (;;) {
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            int e = got < 0 ? -errno : 0;
            close(fd);
            if (e < 0)
                return e;
            break;
        }
        n += (size_t)got;
        if (n == cap - 1) {
            close(fd);
            return -EFBIG;
        }
    }
    buf[n] = '\0';
    return (ssize_t)n;
}

static const char *json_str(json_t *o, const char *name)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? s : "";
}

/* Copies s into out[cap] when it fits; 0 or -EBADMSG. */
static int copy_field(char *out, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap)
        return -EBADMSG;
    memcpy(out, s, n + 1);
    return 0;
}

int dscache_peek(dscache *c, const char *key, dscache_entry *e, char *err)
{
    char path[PATH_MAX], text[META_MAX];
    int rc = entry_path(c, key, "json", path, err);
    if (rc < 0)
        return rc;
    ssize_t n = read_small(path, text, sizeof text);
    if (n == -ENOENT)
        return err_set(err, -ENOENT, "no entry %s", key);
    if (n < 0)
        return err_set(err, -EBADMSG, "cannot read %s: %s", path, strerror((int)-n));
    json_t *m = json_loadb(text, (size_t)n, 0, NULL);
    dscache_entry got = {0};
    json_int_t size = json_integer_value(json_object_get(m, "size"));
    json_int_t downloaded = json_integer_value(json_object_get(m, "downloaded"));
    got.size = (uint64_t)size;
    got.downloaded = (uint64_t)downloaded;
    got.was_gzip = json_is_true(json_object_get(m, "gzip"));
    got.created_us = json_integer_value(json_object_get(m, "created_us"));
    got.last_use_us = json_integer_value(json_object_get(m, "last_use_us"));
    rc = !m || strcmp(json_str(m, "key"), key) != 0 || size < 0 || downloaded < 0 ? -EBADMSG : 0;
    if (rc == 0)
        rc = copy_field(got.sha256, sizeof got.sha256, json_str(m, "sha256"));
    if (rc == 0)
        rc = copy_field(got.wire_sha256, sizeof got.wire_sha256, json_str(m, "download_sha256"));
    if (rc == 0)
        rc = copy_field(got.etag, sizeof got.etag, json_str(m, "etag"));
    if (rc == 0)
        rc = copy_field(got.last_modified, sizeof got.last_modified, json_str(m, "last_modified"));
    if (rc == 0 && (!is_hex(got.sha256, KEY_LEN) || !is_hex(got.wire_sha256, KEY_LEN)))
        rc = -EBADMSG;
    json_decref(m);
    if (rc < 0)
        return err_set(err, rc, "%s is not a dataset cache entry", path);
    *e = got;
    return 0;
}

/* Writes data to a new temporary file of c, whose name goes into path[PATH_MAX]. */
static int write_tmp(dscache *c, const char *key, const char *ext, const char *data, size_t len,
                     char *path, char *err)
{
    if (snprintf(path, PATH_MAX, "%s/tmp.%d.%u.%s.%s", c->dir, (int)getpid(), c->seq++, key, ext) >=
        PATH_MAX)
        return err_set(err, -ENAMETOOLONG, "dataset cache folder %s: path too long", c->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return err_set(err, -e, "cannot write %s: %s", path, strerror(e));
    }
    int rc = fwrite(data, 1, len, f) == len ? 0 : -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        unlink(path);
        return err_set(err, rc, "cannot write %s: %s", path, strerror(-rc));
    }
    return 0;
}

/* <key>.json's text for e (a malloc'd string), or NULL when out of memory. */
static char *meta_text(const char *key, const dscache_entry *e)
{
    json_t *m =
        json_pack("{s:i, s:s, s:I, s:s, s:I, s:s, s:b, s:s, s:s, s:I, s:I}", "version", 1, "key",
                  key, "size", (json_int_t)e->size, "sha256", e->sha256, "downloaded",
                  (json_int_t)e->downloaded, "download_sha256", e->wire_sha256, "gzip", e->was_gzip,
                  "etag", e->etag, "last_modified", e->last_modified, "created_us",
                  (json_int_t)e->created_us, "last_use_us", (json_int_t)e->last_use_us);
    char *text = m ? json_dumps(m, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(m);
    return text;
}

/* Renames the temporary file tmp to <key>.<ext>, and empties tmp once it is gone; the caller
 * holds the lock. */
static int move_into_place(dscache *c, const char *key, const char *ext, char *tmp, char *err)
{
    char path[PATH_MAX];
    int rc = entry_path(c, key, ext, path, err);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_set(err, -errno, "cannot rename %s: %s", tmp, strerror(errno));
    if (rc == 0)
        tmp[0] = '\0';
    return rc;
}

/* Writes <key>.json for e by a temporary file and a rename; the caller holds the lock. */
static int meta_write(dscache *c, const char *key, const dscache_entry *e, char *err)
{
    char tmp[PATH_MAX] = "";
    char *text = meta_text(key, e);
    if (!text)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = write_tmp(c, key, "json", text, strlen(text), tmp, err);
    free(text);
    if (rc == 0)
        rc = move_into_place(c, key, "json", tmp, err);
    if (tmp[0])
        unlink(tmp);
    return rc;
}

/* Removes both files of key; the caller holds the lock. */
static void entry_unlink(dscache *c, const char *key)
{
    char path[PATH_MAX];
    if (entry_path(c, key, "json", path, NULL) == 0)
        unlink(path);
    if (entry_path(c, key, "data", path, NULL) == 0)
        unlink(path);
}

int dscache_remove(dscache *c, const char *key, char *err)
{
    int fd = lock_take(c, err);
    if (fd < 0)
        return fd;
    entry_unlink(c, key);
    lock_release(fd);
    return 0;
}

/* Whether two reads of an entry's json describe the same stored bytes. */
static int same_entry(const dscache_entry *a, const dscache_entry *b)
{
    return a->size == b->size && a->created_us == b->created_us && !strcmp(a->sha256, b->sha256);
}

/* Reads <key>.data and checks it against e; 0, -ENOENT, -EBADMSG or -ENOMEM. */
static int data_read(dscache *c, const char *key, const dscache_entry *e, char **data, size_t *len,
                     char *err)
{
    char path[PATH_MAX], hex[65];
    int rc = entry_path(c, key, "data", path, err);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? err_set(err, -ENOENT, "no entry %s", key)
                               : err_set(err, -EBADMSG, "%s: %s", path, strerror(errno));
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size ||
        e->size > SIZE_MAX - 1) {
        rc = err_set(err, -EBADMSG, "%s holds %lld bytes where %llu were stored", path,
                     (long long)st.st_size, (unsigned long long)e->size);
        goto out;
    }
    buf = malloc((size_t)e->size + 1);
    if (!buf) {
        rc = err_set(err, -ENOMEM, "out of memory for %llu cached bytes",
                     (unsigned long long)e->size);
        goto out;
    }
    size_t n = 0;
    while (n < e->size) {
        ssize_t got = read(fd, buf + n, (size_t)e->size - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = err_set(err, -EBADMSG, "%s: short read at %zu bytes", path, n);
            goto out;
        }
        n += (size_t)got;
    }
    buf[n] = '\0';
    sha256_buf_hex(buf, n, hex);
    if (strcmp(hex, e->sha256) != 0) {
        rc = err_set(err, -EBADMSG, "%s has sha256 %s where %s was stored", path, hex, e->sha256);
        goto out;
    }
    *data = buf;
    *len = n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

int dscache_get(dscache *c, const char *key, char **data, size_t *len, dscache_entry *e, char *err)
{
    dscache_entry seen, now;
    char *buf = NULL;
    size_t n = 0;
    int rc = 0;
    /* A second try when a writer replaced the entry while it was being read. */
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = dscache_peek(c, key, &seen, err);
        if (rc < 0)
            return rc;
        rc = data_read(c, key, &seen, &buf, &n, err);
        if (rc == -ENOMEM)
            return rc;
        int fd = lock_take(c, NULL);
        if (fd < 0) { /* no lock, no touch: the bytes checked out all the same */
            if (rc < 0)
                return rc;
            break;
        }
        int same = dscache_peek(c, key, &now, NULL) == 0 && same_entry(&seen, &now);
        if (rc == 0 && same) {
            now.last_use_us = now_us();
            meta_write(c, key, &now, NULL); /* a failed touch only ages the entry */
            seen = now;
        } else if (rc < 0 && same) {
            entry_unlink(c, key); /* corrupt: the next put writes it anew */
        }
        lock_release(fd);
        if (rc == 0 || same || rc == -ENOENT)
            break;
        /* replaced meanwhile: read the new one */
    }
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = n;
    if (e)
        *e = seen;
    return 0;
}

/* An entry the eviction scan found. */
typedef struct scan_item {
    char key[KEY_LEN + 1];
    uint64_t size;
    int64_t last_use_us;
} scan_item;

static int by_last_use(const void *a, const void *b)
{
    const scan_item *x = a, *y = b;
    if (x->last_use_us != y->last_use_us)
        return x->last_use_us < y->last_use_us ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Whether name is <64 hex>.<ext>, with the key copied out. */
static int entry_name(const char *name, const char *ext, char key[KEY_LEN + 1])
{
    size_t n = strlen(name);
    if (n != KEY_LEN + 1 + strlen(ext) || name[KEY_LEN] != '.' || strcmp(name + KEY_LEN + 1, ext))
        return 0;
    memcpy(key, name, KEY_LEN);
    key[KEY_LEN] = '\0';
    return is_hex(key, KEY_LEN);
}

/* Lists the entries, removing crash leftovers (see the top), into *items (malloc'd). The
 * caller holds the lock. */
static int scan(dscache *c, scan_item **items, size_t *count, char *err)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return err_set(err, -errno, "cannot list %s: %s", c->dir, strerror(errno));
    scan_item *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char key[KEY_LEN + 1], path[PATH_MAX], other[PATH_MAX];
        struct stat st;
        if (path_join(path, sizeof path, c->dir, de->d_name, NULL) < 0)
            continue;
        if (strncmp(de->d_name, "tmp.", 4) == 0) {
            if (lstat(path, &st) == 0 && now - st.st_mtime > TMP_STALE_S)
                unlink(path);
        } else if (entry_name(de->d_name, "data", key)) {
            if (entry_path(c, key, "json", other, NULL) == 0 && access(other, F_OK) != 0)
                unlink(path); /* its json never came: a crash between the renames */
        } else if (entry_name(de->d_name, "json", key)) {
            dscache_entry e;
            if (dscache_peek(c, key, &e, NULL) < 0 || entry_path(c, key, "data", other, NULL) < 0 ||
                lstat(other, &st) != 0) {
                entry_unlink(c, key);
                continue;
            }
            if (ARRAY_GROW(v, cap, n + 1, ARRAY_NO_MAX) < 0) { /* the cache's own files */
                rc = err_set(err, -ENOMEM, "out of memory");
                break;
            }
            memcpy(v[n].key, key, sizeof v[n].key);
            v[n].size = (uint64_t)st.st_size; /* what it takes on disk, whatever the json says */
            v[n].last_use_us = e.last_use_us;
            n++;
        }
    }
    closedir(d);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *items = v;
    *count = n;
    return 0;
}

/* Removes least recently used entries (never keep's, which the caller replaces) until incoming
 * more bytes fit under the cap. The caller holds the lock. */
static int evict(dscache *c, uint64_t incoming, const char *keep, char *err)
{
    scan_item *v = NULL;
    size_t n = 0;
    int rc = scan(c, &v, &n, err);
    if (rc < 0)
        return rc;
    uint64_t total = incoming;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].key, keep) != 0)
            total += v[i].size;
    if (n > 1)
        qsort(v, n, sizeof *v, by_last_use);
    for (size_t i = 0; i < n && total > c->cap; i++) {
        if (strcmp(v[i].key, keep) == 0)
            continue;
        entry_unlink(c, v[i].key);
        total -= v[i].size;
    }
    free(v);
    return 0;
}

int dscache_put(dscache *c, const char *key, const char *data, size_t len, const dscache_entry *e,
                char *err)
{
    if ((uint64_t)len > c->cap)
        return err_set(err, -EFBIG, "%zu bytes are more than the dataset cache's cap of %llu", len,
                       (unsigned long long)c->cap);
    dscache_entry m = *e;
    m.size = len;
    sha256_buf_hex(data, len, m.sha256);
    m.created_us = m.last_use_us = now_us();
    char tmp_data[PATH_MAX] = "", tmp_meta[PATH_MAX] = "";
    char *text = meta_text(key, &m);
    int fd = -1, rc = text ? 0 : err_set(err, -ENOMEM, "out of memory");
    if (rc == 0)
        rc = write_tmp(c, key, "data", data, len, tmp_data, err);
    if (rc == 0)
        rc = write_tmp(c, key, "json", text, strlen(text), tmp_meta, err);
    if (rc == 0) {
        fd = lock_take(c, err);
        rc = fd < 0 ? fd : 0;
    }
    if (rc == 0)
        rc = evict(c, len, key, err);
    if (rc == 0)
        rc = move_into_place(c, key, "data", tmp_data, err);
    if (rc == 0)
        rc = move_into_place(c, key, "json", tmp_meta, err);
    lock_release(fd);
    if (tmp_data[0])
        unlink(tmp_data);
    if (tmp_meta[0])
        unlink(tmp_meta);
    free(text);
    return rc;
}

/* The validator of a 200 answer into e, or a note on why there is none (0 or -ENODATA). An
 * ETag is used as it is; a Last-Modified only when the Date is a second or more after it
 * (RFC 9110 8.8.2.2): a file changed twice within one second would otherwise look the same. */
static int pick_validator(const fetch_stats *st, dscache_entry *e, char *note)
{
    if (st->etag[0]) {
        memcpy(e->etag, st->etag, sizeof e->etag);
        return 0;
    }
    if (!st->last_modified[0]) {
        snprintf(note, DSCACHE_NOTE_LEN,
                 "not cached: the server sent neither ETag nor Last-Modified and the job gives "
                 "no dataset.sha256, so it is fetched again each time");
        return -ENODATA;
    }
    time_t lm = curl_getdate(st->last_modified, NULL), date = curl_getdate(st->date, NULL);
    if (lm == -1 || date == -1 || date - lm < 1) {
        snprintf(note, DSCACHE_NOTE_LEN,
                 "not cached: the server's Last-Modified is less than a second before its Date, "
                 "too recent to tell a later change by; give dataset.sha256 to cache it");
        return -ENODATA;
    }
    memcpy(e->last_modified, st->last_modified, sizeof e->last_modified);
    return 0;
}

/* Stores what fetch_url returned; a failure only becomes a note. */
static void store(dscache *c, const char *key, const char *data, size_t len, const fetch_stats *st,
                  dscache_entry *e, dscache_result *res)
{
    char err[ERR_LEN];
    e->downloaded = st->downloaded;
    e->was_gzip = st->was_gzip;
    memcpy(e->wire_sha256, st->sha256, sizeof e->wire_sha256);
    if (dscache_put(c, key, data, len, e, err) < 0)
        snprintf(res->note, sizeof res->note, "not cached: %s", err);
}

/* Hands a cached entry out as fetch_url would have: checks the size limit, fills the stats. */
static int hand_out(const dscache_entry *e, char *data, size_t n, const fetch_opts *o, double t0,
                    char **out, size_t *len, fetch_stats *st, char *err)
{
    uint64_t max = o->max_bytes ? o->max_bytes : FETCH_DEFAULT_MAX_BYTES;
    if (n > max || e->downloaded > max) {
        free(data);
        return err_set(err, -EFBIG,
                       "the dataset is larger than the limit of %llu bytes (%llu bytes "
                       "downloaded, %zu decompressed; cached)",
                       (unsigned long long)max, (unsigned long long)e->downloaded, n);
    }
    if (st) {
        memset(st, 0, sizeof *st);
        st->downloaded = e->downloaded;
        st->decompressed = n;
        st->was_gzip = e->was_gzip;
        st->seconds = time_mono() - t0;
        memcpy(st->sha256, e->wire_sha256, sizeof st->sha256);
        memcpy(st->etag, e->etag, sizeof st->etag);
        memcpy(st->last_modified, e->last_modified, sizeof st->last_modified);
    }
    *out = data;
    *len = n;
    return 0;
}

/* Keyed by the job's sha256: a hit makes no request. */
static int fetch_pinned(dscache *c, const char *id, const char *url, const fetch_opts *o,
                        char **out, size_t *len, fetch_stats *st, dscache_result *res, char *err)
{
    char key[65], cerr[ERR_LEN];
    dscache_entry e = {0};
    char *data = NULL;
    size_t n = 0;
    double t0 = time_mono();
    fetch_stats own; /* store() reads the stats, which the caller may not want */
    st = st ? st : &own;
    dscache_key(id, o->sha256, key);
    int rc = dscache_get(c, key, &data, &n, &e, cerr);
    if (rc == 0 && strcasecmp(e.wire_sha256, o->sha256) == 0) {
        res->how = DSCACHE_HIT;
        return hand_out(&e, data, n, o, t0, out, len, st, err);
    }
    if (rc == 0) { /* only a hand-edited entry gets here */
        free(data);
        dscache_remove(c, key, NULL);
        snprintf(cerr, sizeof cerr, "its download sha256 %s is not the job's", e.wire_sha256);
        rc = -EBADMSG;
    }
    if (rc != -ENOENT)
        snprintf(res->note, sizeof res->note, "the cached copy was unusable (%s); fetched again",
                 cerr);
    rc = fetch_url(url, o, out, len, st, err);
    if (rc == 0) {
        dscache_entry fresh = {0};
        store(c, key, *out, *len, st, &fresh, res);
    }
    return rc;
}

/* Keyed by the URL: a conditional request with the stored validator. */
static int fetch_validated(dscache *c, const char *id, const char *url, const fetch_opts *o,
                           char **out, size_t *len, fetch_stats *st, dscache_result *res, char *err)
{
    char key[65], cerr[ERR_LEN];
    dscache_entry old = {0}, e = {0};
    fetch_opts fo = *o;
    fetch_stats own;
    double t0 = time_mono();
    st = st ? st : &own;
    dscache_key(id, NULL, key);
    int have = dscache_peek(c, key, &old, NULL) == 0;
    if (have && old.etag[0])
        fo.if_none_match = old.etag;
    else if (have && old.last_modified[0])
        fo.if_modified_since = old.last_modified;
    int rc = fetch_url(url, &fo, out, len, st, err);
    if (rc == FETCH_NOT_MODIFIED) {
        char *data = NULL;
        size_t n = 0;
        rc = dscache_get(c, key, &data, &n, &e, cerr);
        if (rc == 0) {
            res->how = DSCACHE_REVALIDATED;
            return hand_out(&e, data, n, o, t0, out, len, st, err);
        }
        snprintf(res->note, sizeof res->note,
                 "the server said the cached copy is current, but it was unusable (%s); "
                 "fetched again",
                 cerr);
        fo.if_none_match = fo.if_modified_since = NULL;
        rc = fetch_url(url, &fo, out, len, st, err);
    }
    if (rc < 0)
        return rc;
    if (pick_validator(st, &e, res->note) < 0) {
        if (have)
            dscache_remove(c, key, NULL); /* stale now, and nothing to check it by */
        return 0;
    }
    store(c, key, *out, *len, st, &e, res);
    return 0;
}

/* What an s3:// URL is cached under (malloc'd, NULL when out of memory): the URL, the endpoint
 * and the access key id, so that another endpoint's object of the same name, or bytes that
 * other credentials fetched, are never handed out. The secret is not part of it. */
static char *s3_identity(const char *url, const fetch_s3 *s3)
{
    const char *ep = s3->endpoint ? s3->endpoint : "aws";
    const char *region = s3->region ? s3->region : "";
    size_t n = strlen(url) + strlen(ep) + strlen(region) + strlen(s3->access_key) + 4;
    char *id = malloc(n);
    if (id)
        snprintf(id, n, "%s\n%s\n%s\n%s", url, ep, region, s3->access_key);
    return id;
}

int dscache_fetch(dscache *c, const char *url, const fetch_opts *o, char **out, size_t *len,
                  fetch_stats *st, dscache_result *res, char *err)
{
    static const fetch_opts none;
    dscache_result own;
    res = res ? res : &own;
    memset(res, 0, sizeof *res);
    o = o ? o : &none;
    int http = url && (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0);
    int s3 =
        url && strncmp(url, "s3://", 5) == 0 && o->s3 && o->s3->access_key && o->s3->secret_key;
    /* file:// is not cached: it is a local read already, as quick as reading a copy */
    if (!c || !(http || s3) || o->if_none_match || o->if_modified_since)
        return fetch_url(url, o, out, len, st, err);
    if (o->sha256 && !(strlen(o->sha256) == KEY_LEN && is_hex(o->sha256, KEY_LEN)))
        return fetch_url(url, o, out, len, st, err); /* malformed: fetch_url says how */
    char *id = s3 ? s3_identity(url, o->s3) : NULL;
    if (s3 && !id)
        return err_set(err, -ENOMEM, "out of memory");
    const char *key = id ? id : url;
    int rc = o->sha256 ? fetch_pinned(c, key, url, o, out, len, st, res, err)
                       : fetch_validated(c, key, url, o, out, len, st, res, err);
    free(id);
    return rc;
}
