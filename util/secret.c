/* secret: sealing small secrets under a data-directory key (see secret.h).
 *
 * Built from the SHA-256 already here: HMAC-SHA256 (RFC 2104) as the pseudo-random function
 * both for the key stream (counter mode over the nonce) and for the tag. Secrets are short
 * (a URL's userinfo, at most a few hundred bytes), so speed is no concern. The tag is checked
 * in constant time before anything is decrypted. */
#include "util/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/err.h"
#include "util/sha256.h"

#define SECRET_NONCE  16
#define SECRET_TAG    16
#define SECRET_PREFIX "s1."

/* HMAC-SHA256(key, label || a || b) into out. */
static void secret_hmac(const uint8_t key[SECRET_KEY_LEN], char label, const void *a, size_t alen,
                        const void *b, size_t blen, uint8_t out[32])
{
    uint8_t pad[64], inner[32];
    sha256_ctx c;
    memset(pad, 0x36, sizeof pad);
    for (size_t i = 0; i < SECRET_KEY_LEN; i++)
        pad[i] ^= key[i];
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, &label, 1);
    sha256_update(&c, a, alen);
    sha256_update(&c, b, blen);
    sha256_final(&c, inner);
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] ^= 0x36 ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, inner, sizeof inner);
    sha256_final(&c, out);
}

/* XORs data with the key stream of nonce (encrypts and decrypts alike). */
static void secret_xor(const uint8_t key[SECRET_KEY_LEN], const uint8_t *nonce, uint8_t *data,
                       size_t len)
{
    uint8_t block[32];
    for (size_t off = 0; off < len; off += sizeof block) {
        uint32_t n = (uint32_t)(off / sizeof block);
        uint8_t counter[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                              (uint8_t)n};
        secret_hmac(key, 'e', nonce, SECRET_NONCE, counter, sizeof counter, block);
        for (size_t i = 0; i < sizeof block && off + i < len; i++)
            data[off + i] ^= block[i];
    }
}

int secret_random(uint8_t *out, size_t n, char *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_set(err, -errno, "getrandom: %s", strerror(errno));
        got += (size_t)r;
    }
    return 0;
}

/* Reads exactly n bytes of fd; 0, or -EIO for a short file. */
static int secret_read_all(int fd, uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += (size_t)r;
    }
    uint8_t extra;
    return read(fd, &extra, 1) == 0 ? 0 : -EIO;
}

int secret_key_load(const char *path, uint8_t key[SECRET_KEY_LEN], char *err)
{
    uint8_t k[SECRET_KEY_LEN];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), rc = 0;
    if (fd >= 0) { /* the first start: a new key */
        rc = secret_random(k, sizeof k, err);
        if (rc == 0 && (write(fd, k, sizeof k) != (ssize_t)sizeof k || fsync(fd) != 0))
            rc = err_set(err, -EIO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        if (rc < 0)
            unlink(path);
    } else if (errno == EEXIST) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
        if (secret_read_all(fd, k, sizeof k) < 0)
            rc = err_set(err, -EIO,
                         "%s is not a %d-byte key: restore it from a backup, or remove it (the "
                         "credentials of queued jobs are then lost)",
                         path, SECRET_KEY_LEN);
        close(fd);
    } else {
        return err_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
    }
    if (rc == 0)
        memcpy(key, k, sizeof k);
    return rc;
}

int secret_text_seal(const uint8_t key[SECRET_KEY_LEN], const char *plain, char **out, char *err)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = strlen(plain), raw_len = SECRET_NONCE + len + SECRET_TAG;
    uint8_t *raw = malloc(raw_len), tag[32];
    char *text = malloc(sizeof SECRET_PREFIX + 2 * raw_len);
    int rc = raw && text ? 0 : err_set(err, -ENOMEM, "out of memory");
    if (rc == 0)
        rc = secret_random(raw, SECRET_NONCE, err);
    if (rc < 0) {
        free(raw);
        free(text);
        return rc;
    }
    memcpy(raw + SECRET_NONCE, plain, len);
    secret_xor(key, raw, raw + SECRET_NONCE, len);
    secret_hmac(key, 'm', raw, SECRET_NONCE, raw + SECRET_NONCE, len, tag);
    memcpy(raw + SECRET_NONCE + len, tag, SECRET_TAG);
    strcpy(text, SECRET_PREFIX);
    char *o = text + sizeof SECRET_PREFIX - 1;
    for (size_t i = 0; i < raw_len; i++) {
        *o++ = hex[raw[i] >> 4];
        *o++ = hex[raw[i] & 15];
    }
    *o = '\0';
    free(raw);
    *out = text;
    return 0;
}

static int secret_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int secret_text_open(const uint8_t key[SECRET_KEY_LEN], const char *sealed, char **out, char *err)
{
    size_t plen = sizeof SECRET_PREFIX - 1, hlen = strlen(sealed);
    if (strncmp(sealed, SECRET_PREFIX, plen) != 0 || (hlen - plen) % 2 != 0 ||
        (hlen - plen) / 2 < SECRET_NONCE + SECRET_TAG)
        return err_set(err, -EBADMSG, "not a sealed secret");
    size_t raw_len = (hlen - plen) / 2, len = raw_len - SECRET_NONCE - SECRET_TAG;
    uint8_t *raw = malloc(raw_len), tag[32];
    char *plain = malloc(len + 1);
    int rc = raw && plain ? 0 : err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < raw_len; i++) {
        int hi = secret_hex_digit(sealed[plen + 2 * i]),
            lo = secret_hex_digit(sealed[plen + 2 * i + 1]);
        if (hi < 0 || lo < 0)
            rc = err_set(err, -EBADMSG, "not a sealed secret");
        else
            raw[i] = (uint8_t)(hi << 4 | lo);
    }
    if (rc == 0) {
        secret_hmac(key, 'm', raw, SECRET_NONCE, raw + SECRET_NONCE, len, tag);
        uint8_t diff = 0;
        for (size_t i = 0; i < SECRET_TAG; i++)
            diff |= (uint8_t)(tag[i] ^ raw[SECRET_NONCE + len + i]);
        if (diff)
            rc = err_set(err, -EBADMSG,
                         "the secret was sealed under another key (was the data directory's "
                         "credentials.key replaced?) or altered");
    }
    if (rc == 0) {
        secret_xor(key, raw, raw + SECRET_NONCE, len);
        memcpy(plain, raw + SECRET_NONCE, len);
        plain[len] = '\0';
        *out = plain;
        plain = NULL;
    }
    free(raw);
    free(plain);
    return rc;
}
