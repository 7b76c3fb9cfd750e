/* hmac: HMAC-SHA256 (RFC 2104 over FIPS 180-4 SHA-256), for the webhook signatures
 * (scheduler/notify.h). Keys of any length: one longer than SHA-256's 64-byte block is hashed
 * first, as the RFC says. */
#ifndef TRAINYARD_UTIL_HMAC_H
#define TRAINYARD_UTIL_HMAC_H

#include <stddef.h>
#include <stdint.h>

/* HMAC-SHA256(key, msg) into out[32]. */
void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32]);
/* The same over the concatenation of two messages (a prefix and a body, without copying). */
void hmac_sha256_2(const void *key, size_t key_len, const void *a, size_t a_len, const void *b,
                   size_t b_len, uint8_t out[32]);

#endif
