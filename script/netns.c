/* netns: the shared network namespace of a distributed script job's sandboxes (see netns.h). */
#include "script/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/err.h"

/* Writes text to path (a /proc file of the holder's own): 0 or -errno. */
static int put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -errno;
    close(fd);
    return rc;
}

/* The holder's set-up, in the forked child: async-signal-safe calls only. 0 or -errno. */
static int holder_setup(const char *uid_map, const char *gid_map)
{
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        return -errno;
    int rc = put("/proc/self/uid_map", uid_map);
    if (rc == 0) { /* an unprivileged gid_map needs setgroups denied first */
        rc = put("/proc/self/setgroups", "deny");
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0)
        rc = put("/proc/self/gid_map", gid_map);
    if (rc < 0)
        return rc;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    rc = ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ? -errno : 0;
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
    }
    close(s);
    return rc;
}

int netns_start(pid_t *holder, char *err)
{
    char uid_map[64], gid_map[64];
    snprintf(uid_map, sizeof uid_map, "%u %u 1\n", (unsigned)getuid(), (unsigned)getuid());
    snprintf(gid_map, sizeof gid_map, "%u %u 1\n", (unsigned)getgid(), (unsigned)getgid());
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, -errno, "pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return err_set(err, -e, "fork: %s", strerror(e));
    }
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(p[0]);
        int rc = holder_setup(uid_map, gid_map);
        ssize_t ignored = write(p[1], &rc, sizeof rc);
        (void)ignored;
        close(p[1]);
        if (rc < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    int rc = 0;
    ssize_t n;
    while ((n = read(p[0], &rc, sizeof rc)) < 0 && errno == EINTR)
        ;
    close(p[0]);
    if (n != (ssize_t)sizeof rc)
        rc = -ECHILD;
    if (rc < 0) {
        netns_stop(child);
        return err_set(err, rc,
                       "cannot make the network namespace the ranks share: %s (user namespaces "
                       "must be allowed, as bubblewrap needs them)",
                       strerror(-rc));
    }
    *holder = child;
    return 0;
}

void netns_stop(pid_t holder)
{
    if (holder <= 0)
        return;
    kill(holder, SIGKILL);
    while (waitpid(holder, NULL, 0) < 0 && errno == EINTR)
        ;
}

int netns_open(pid_t holder, netns_fds *out, char *err)
{
    char path[64];
    out->user = out->net = -1;
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)holder);
    out->user = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)holder);
    if (out->user >= 0)
        out->net = open(path, O_RDONLY | O_CLOEXEC);
    if (out->net < 0) {
        int e = errno;
        netns_close(out);
        return err_set(err, -e, "cannot open the ranks' network namespace (%s): %s", path,
                       strerror(e));
    }
    return 0;
}

void netns_close(netns_fds *f)
{
    if (f->user >= 0)
        close(f->user);
    if (f->net >= 0)
        close(f->net);
    f->user = f->net = -1;
}

int netns_join(const netns_fds *f)
{
    if (setns(f->user, CLONE_NEWUSER) < 0 || setns(f->net, CLONE_NEWNET) < 0)
        return -errno;
    return 0;
}
