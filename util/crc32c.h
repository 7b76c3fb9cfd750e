/* crc32c: CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor
 * 0xFFFFFFFF), the checksum of TFRecord framing (proto/tfevents.h). Slice-by-8 tables, built on
 * first use (thread-safe: pthread_once); about 1 GB/s, far more than an event file needs. */
#ifndef TRAINYARD_UTIL_CRC32C_H
#define TRAINYARD_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over len bytes at data: crc32c(crc32c(0, a), b) is the CRC of a
 * followed by b. crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

/* TFRecord's masked CRC of len bytes: ((c >> 15) | (c << 17)) + 0xa282ead8 with c the CRC-32C,
 * so that a CRC stored inside checksummed data does not checksum to a fixed point. */
uint32_t crc32c_masked(const void *data, size_t len);

#endif
