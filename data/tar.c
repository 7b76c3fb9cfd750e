/* tar: the walk described in tar.h; the format is util/tar.c's.
 *
 * The whole archive is in memory, so each call hands the stream everything not yet taken: it
 * stops at a member's header (checked here against the datasets' rules) and then gives that
 * member's data as one piece, which the entry already points to and the walk passes over. */
#include "data/tar.h"

#include <errno.h>
#include <string.h>

#include "util/err.h"

int tar_probe(const char *data, size_t len)
{
    return len >= TAR_BLOCK && tar_is_header(data);
}

void tar_reader_init(tar_reader *r, const char *data, size_t len)
{
    memset(r, 0, sizeof *r);
    r->data = data;
    r->len = len;
    tar_stream_init(&r->t);
}

/* Writes the normalised form of path into out[TAR_PATH_MAX]; -1 when it is absolute, has a
 * ".." component or is empty once normalised. */
static int tar_normalise(const char *path, char *out)
{
    size_t o = 0, i = 0, len = strlen(path);
    if (len == 0 || path[0] == '/')
        return -1;
    while (i < len) {
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 2 && path[i] == '.' && path[i + 1] == '.')
            return -1;
        if (n > 0 && !(n == 1 && path[i] == '.')) {
            if (o > 0)
                out[o++] = '/';
            memcpy(out + o, path + i, n); /* never longer than path, which fits */
            o += n;
        }
        i = j + 1;
    }
    if (o == 0)
        return -1;
    out[o] = '\0';
    return 0;
}

int tar_reader_next(tar_reader *r, tar_entry *e, char *err)
{
    for (;;) {
        size_t used, piece;
        const void *d;
        int ev = tar_stream_next(&r->t, r->data + r->pos, r->len - r->pos, &used, &d, &piece, err);
        if (ev < 0)
            return ev;
        r->pos += used;
        if (ev == TAR_END)
            return 0;
        if (ev == TAR_MORE) /* all taken: a clean end, or a cut one */
            return tar_stream_end(&r->t, err);
        if (ev == TAR_DATA)
            continue; /* a member handed out already, or skipped */
        const tar_member *m = &r->t.m;
        switch (m->type) {
        case 'V': /* a volume label */
        case '5':
            continue;
        case '0':
        case '\0':
        case '7':
            break;
        case '1':
        case '2':
            return err_set(err, -EINVAL,
                           "tar member %.200s is a link; only regular files are read from an "
                           "archive",
                           m->path);
        default:
            return err_set(err, -EINVAL,
                           "tar member %.200s has type 0x%02x, not a regular file or a directory",
                           m->path, (unsigned char)m->type);
        }
        if (m->size > r->len - r->pos) { /* the stream takes what is there and says so */
            tar_stream_next(&r->t, r->data + r->pos, r->len - r->pos, &used, &d, &piece, err);
            return tar_stream_end(&r->t, err);
        }
        if (tar_normalise(m->path, r->name) < 0)
            return err_set(err, -EINVAL,
                           "tar member %.200s: an absolute path, a '..' component or an empty name "
                           "is refused",
                           m->path);
        e->name = r->name;
        e->data = r->data + r->pos;
        e->size = (size_t)m->size;
        return 1;
    }
}
