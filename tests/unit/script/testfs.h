/* testfs: the few file helpers the script tests share (write a file with a mode, read one
 * whole, remove a tree). */
#ifndef TRAINYARD_TESTS_SCRIPT_TESTFS_H
#define TRAINYARD_TESTS_SCRIPT_TESTFS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Writes text to path and sets its mode. */
static inline void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

/* The whole file, malloc'd with a NUL after it (the caller frees), or NULL; *len its size. */
static inline char *read_all(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = b ? fread(b, 1, (size_t)n, f) : 0;
    if (b)
        b[got] = '\0';
    fclose(f);
    *len = got;
    return b;
}

/* rm -rf dir, saying so when it fails. */
static inline void rm_tree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
