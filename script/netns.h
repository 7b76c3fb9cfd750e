/* netns: one network namespace that the sandboxes of a distributed script job's ranks share, so
 * that they reach each other on 127.0.0.1 and nothing else.
 *
 * bubblewrap can only make a namespace of its own (--unshare-net: every rank would be alone)
 * or keep the caller's (--share-net: every rank would see the machine's network). So the ranks'
 * sandboxes keep the caller's, and the caller is moved first: netns_start forks a holder that
 * makes a user namespace (the caller's uid and gid mapped to themselves, so nothing needs root)
 * and a network namespace owned by it, brings its loopback up and then only waits. A script's
 * process joins both (netns_join, between fork and the exec of bwrap) before bwrap runs; bwrap
 * then nests its own user namespace inside, as it does anywhere.
 *
 * The holder dies with the thread that started it (PR_SET_PDEATHSIG) or at netns_stop; the
 * namespace lives while the holder or a process in it does. Linux only. */
#ifndef TRAINYARD_SCRIPT_NETNS_H
#define TRAINYARD_SCRIPT_NETNS_H

#include <sys/types.h>

/* Starts the holder: 0 with its pid in *holder, or -errno with a sentence in err (user
 * namespaces disabled, for one). */
int netns_start(pid_t *holder, char *err);
/* Ends the holder (SIGKILL) and reaps it; 0 is ignored. */
void netns_stop(pid_t holder);

/* The descriptors of holder's namespaces, opened before a fork (O_CLOEXEC). */
typedef struct netns_fds {
    int user, net;
} netns_fds;

/* Opens holder's user and network namespaces: 0, or -errno with a sentence. */
int netns_open(pid_t holder, netns_fds *out, char *err);
void netns_close(netns_fds *f);
/* In a forked child (async-signal-safe): enters the user namespace, then the network one. 0, or
 * -errno. */
int netns_join(const netns_fds *f);

#endif
