/* cli_tls: the certificate files the commands take (serve's --tls-cert and --tls-key, the CA
 * bundles of --ca and --dataset-ca). serve pins the server's certificate for its local workers
 * itself (serve/serve.c).
 *
 * Files are checked when the command starts, so that a missing, unreadable or wrong file is a
 * usage error naming the file and the flag, not a TLS failure later. PEM files are read whole,
 * up to CLI_PEM_MAX: a certificate chain or a CA bundle is far smaller (Debian's whole system
 * store is about 200 KiB). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/err.h"

#define CLI_PEM_MAX (1 << 20)

int cli_pem_read(const char *cmd, const char *flag, const char *path, const char *label, char **out)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, marker[64];
    size_t n = 0;

    if (!f) {
        fprintf(stderr, "trainyard %s: %s %s: cannot read it: %s\n", cmd, flag, path,
                strerror(errno));
        return -errno;
    }
    buf = malloc(CLI_PEM_MAX + 1);
    if (buf)
        n = fread(buf, 1, CLI_PEM_MAX + 1, f);
    int bad = !buf || ferror(f) || n > CLI_PEM_MAX;
    fclose(f);
    if (bad) {
        fprintf(stderr, "trainyard %s: %s %s: cannot read it (%s)\n", cmd, flag, path,
                !buf              ? "out of memory"
                : n > CLI_PEM_MAX ? "larger than 1 MiB"
                                  : "read error");
        free(buf);
        return -EIO;
    }
    buf[n] = '\0';
    /* "PRIVATE KEY" matches "RSA PRIVATE KEY" and "EC PRIVATE KEY" as well */
    snprintf(marker, sizeof marker, "%s-----", label);
    if (strlen(buf) != n || !strstr(buf, "-----BEGIN ") || !strstr(buf, marker)) {
        fprintf(stderr, "trainyard %s: %s %s: not a PEM file holding a %s\n", cmd, flag, path,
                label);
        free(buf);
        return -EINVAL;
    }
    *out = buf;
    return 0;
}

int cli_pem_check(const char *cmd, const char *flag, const char *path)
{
    char *pem = NULL;
    int rc = cli_pem_read(cmd, flag, path, "CERTIFICATE", &pem);
    free(pem);
    return rc;
}
