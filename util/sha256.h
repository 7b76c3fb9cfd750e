/* sha256: FIPS 180-4 SHA-256, streaming, for dataset checksums and artifact digests. */
#ifndef TRAINYARD_UTIL_SHA256_H
#define TRAINYARD_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t state[8];
    uint64_t length; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes waiting in block */
} sha256_ctx;

/* Starts a new hash. */
void sha256_init(sha256_ctx *c);
/* Feeds len bytes. */
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Finishes the hash into out[32]; c must be re-initialised before reuse. */
void sha256_final(sha256_ctx *c, uint8_t out[32]);
/* Writes the 64 lowercase hex digits of digest and a NUL into hex[65]. */
void sha256_hex(const uint8_t digest[32], char hex[65]);
/* The hex SHA-256 of len bytes at data, into hex[65]. */
void sha256_buf_hex(const void *data, size_t len, char hex[65]);
/* The hex SHA-256 and the size of the file at path (read to its end); -errno when it cannot be
 * opened or read. */
int sha256_file(const char *path, char hex[65], uint64_t *size, char *err);

#endif
