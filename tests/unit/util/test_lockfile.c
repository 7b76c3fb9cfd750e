/* Unit tests of util/lockfile: a second process is refused the lock and told who holds it (pid
 * and note), a killed owner's lock is gone at once (kill -9 leaves only a stale file), and a
 * released lock can be taken again. The other process is a forked child: POSIX record locks
 * are per process, so this process cannot conflict with itself. */
#include "util/lockfile.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

/* Forks a child that takes the lock at path, notes "http://child", writes a byte to the pipe
 * and sleeps until killed; returns its pid once it holds the lock. */
static pid_t owner_start(const char *path)
{
    int p[2];
    CHECK_INT(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = -1;
        char err[ERR_LEN];
        if (lockfile_take(path, &fd, NULL, err) < 0 || lockfile_note(fd, "http://child", err) < 0)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char c = 0;
    CHECK_INT(read(p[0], &c, 1), 1);
    close(p[0]);
    close(p[1]);
    return pid;
}

int main(void)
{
    char dir[] = "/tmp/trainyard-test-lock-XXXXXX", path[128], err[ERR_LEN];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/serve.lock", dir);

    pid_t child = owner_start(path);
    lockfile_owner owner;
    int fd = -1;
    CHECK_INT(lockfile_take(path, &fd, &owner, err), -EBUSY);
    CHECK_INT(fd, -1);
    CHECK_INT(owner.pid, child);
    CHECK_STR(owner.note, "http://child");

    kill(child, SIGKILL); /* the kernel drops the lock with the process */
    waitpid(child, NULL, 0);
    CHECK_INT(lockfile_take(path, &fd, &owner, err), 0);
    CHECK(fd >= 0);
    CHECK_INT(lockfile_note(fd, "http://parent", err), 0);
    lockfile_release(fd);

    fd = -1;
    CHECK_INT(lockfile_take(path, &fd, NULL, err), 0); /* released: free again */
    lockfile_release(fd);
    lockfile_release(-1);
    unlink(path);
    rmdir(dir);
    return check_exit();
}
