/* lockfile: a folder's owner, by an fcntl lock on a file in it (see lockfile.h).
 *
 * Invariant: a descriptor handed out by lockfile_take() holds the write lock until
 * lockfile_release() closes it or the process ends; the file's content is rewritten only
 * through that descriptor, so a reader that cannot take the lock reads the owner's words. */
#include "util/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

/* Reads the owner's pid and note from fd; where the file names no pid, asks the kernel which
 * process holds the lock (F_GETLK; 0 across pid namespaces). */
static void lockfile_owner_read(int fd, lockfile_owner *owner)
{
    char text[LOCKFILE_NOTE_MAX + 32];
    memset(owner, 0, sizeof *owner);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    char *end = NULL;
    long pid = strtol(text, &end, 10);
    if (end != text && *end == '\n' && pid > 0) {
        owner->pid = (pid_t)pid;
        snprintf(owner->note, sizeof owner->note, "%s", end + 1);
        owner->note[strcspn(owner->note, "\n")] = '\0';
        return;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
        owner->pid = fl.l_pid;
}

int lockfile_take(const char *path, int *fd, lockfile_owner *owner, char *err)
{
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (f < 0)
        return err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(f, F_SETLK, &fl) < 0) {
        int rc = errno == EAGAIN || errno == EACCES
                     ? err_set(err, -EBUSY, "%s is locked by another process", path)
                     : err_set(err, -errno, "cannot lock %s: %s", path, strerror(errno));
        if (rc == -EBUSY && owner)
            lockfile_owner_read(f, owner);
        close(f); /* our descriptor: the owner's lock stays */
        return rc;
    }
    int rc = lockfile_note(f, "", err);
    if (rc < 0) {
        close(f);
        return rc;
    }
    *fd = f;
    return 0;
}

int lockfile_note(int fd, const char *note, char *err)
{
    char text[LOCKFILE_NOTE_MAX + 32];
    int n = snprintf(text, sizeof text, "%d\n%s%s", (int)getpid(), note, *note ? "\n" : "");
    if (n < 0 || (size_t)n >= sizeof text)
        return err_set(err, -ENAMETOOLONG, "the lock file's note is too long");
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
        return err_set(err, -errno, "cannot write the lock file: %s", strerror(errno));
    return 0;
}

void lockfile_release(int fd)
{
    if (fd < 0)
        return;
    if (ftruncate(fd, 0) < 0) {
        /* nothing to do: the content means nothing once the lock is gone */
    }
    close(fd);
}
