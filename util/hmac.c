/* hmac: HMAC-SHA256, see hmac.h. */
#include "util/hmac.h"

#include <string.h>

#include "util/sha256.h"

#define HMAC_BLOCK 64

void hmac_sha256_2(const void *key, size_t key_len, const void *a, size_t a_len, const void *b,
                   size_t b_len, uint8_t out[32])
{
    uint8_t k[HMAC_BLOCK] = {0}, pad[HMAC_BLOCK], inner[32];
    sha256_ctx c;
    if (key_len > HMAC_BLOCK) { /* K' = H(K), then zero-padded like a short key */
        sha256_init(&c);
        sha256_update(&c, key, key_len);
        sha256_final(&c, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (size_t i = 0; i < HMAC_BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    if (a_len)
        sha256_update(&c, a, a_len);
    if (b_len)
        sha256_update(&c, b, b_len);
    sha256_final(&c, inner);
    for (size_t i = 0; i < HMAC_BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, inner, sizeof inner);
    sha256_final(&c, out);
    memset(k, 0, sizeof k);
    memset(pad, 0, sizeof pad);
}

void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32])
{
    hmac_sha256_2(key, key_len, msg, msg_len, NULL, 0, out);
}
