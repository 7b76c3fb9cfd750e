/* lockfile: one process at a time owns a folder, through a lock on a file in it.
 *
 * The lock is a POSIX record lock (fcntl F_SETLK, write, whole file) on a file opened with
 * O_CLOEXEC: the kernel drops it when the process ends, however it ends (kill -9 included),
 * so a stale file never blocks anyone, and child processes neither inherit nor keep it. The
 * file itself is never removed (removing it would let two processes lock two different files
 * of the same name); what it says only means something while it is locked.
 *
 * The file holds the owner's pid on the first line and, once the owner has one to give, a
 * note on the second (serve writes the address it listens on), so that a process refused the
 * lock can say who holds it.
 *
 * Caveat of POSIX record locks: closing ANY descriptor of the file in the owning process drops
 * the lock, so nothing but this module may open the lock file. */
#ifndef TRAINYARD_UTIL_LOCKFILE_H
#define TRAINYARD_UTIL_LOCKFILE_H

#include <stddef.h>
#include <sys/types.h>

#define LOCKFILE_NOTE_MAX 512

/* What a refused lockfile_take() learnt about the owner. */
typedef struct lockfile_owner {
    pid_t pid;                    /* 0 when unknown */
    char note[LOCKFILE_NOTE_MAX]; /* "" until the owner wrote one */
} lockfile_owner;

/* Creates path (mode 0600) if needed and locks it; writes this process's pid into it and sets
 * *fd. -EBUSY when another process holds it, with *owner filled (when owner is not NULL);
 * another negative errno when the file cannot be opened or locked. */
int lockfile_take(const char *path, int *fd, lockfile_owner *owner, char *err);
/* Rewrites the file of a held lock as "<pid>\n<note>\n". */
int lockfile_note(int fd, const char *note, char *err);
/* Empties the file and drops the lock (closes fd); accepts -1. */
void lockfile_release(int fd);

#endif
