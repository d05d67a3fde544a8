/* The frame both built-in compressors write: one byte saying how the rest is stored, then
 *   0: the input as it was (compressing did not make it smaller), or
 *   1: its length (u64, little-endian) and the compressed bytes.
 * Shared by plugins/zstd and plugins/lz4; see cairn-plugins(7). */
#ifndef CAIRN_PLUGINS_FRAME_H
#define CAIRN_PLUGINS_FRAME_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cairn/plugin.h"

enum { FRAME_RAW = 0, FRAME_COMPRESSED = 1, FRAME_HEAD = 9 };

static inline void frame_put_length(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t frame_get_length(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static inline int frame_error(char *err, size_t err_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
  return CAIRN_PLUGIN_ERROR;
}

/* The input stored as it is. REQUIRES out_cap >= in_len + 1. */
static inline int frame_store_raw(const uint8_t *in, size_t in_len, uint8_t *out, size_t *out_len) {
  out[0] = FRAME_RAW;
  if (in_len) memcpy(out + 1, in, in_len);
  *out_len = in_len + 1;
  return CAIRN_PLUGIN_OK;
}

/* Decodes a raw frame, or checks a compressed one's head and tells its length. Returns OK with
 * *length set for a compressed frame the caller decompresses, 1 when done (raw), or an error. */
static inline int frame_open(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap, size_t *out_len,
                             uint64_t *length, char *err, size_t err_len) {
  if (in_len < 1) return frame_error(err, err_len, "an empty frame");
  if (in[0] == FRAME_RAW) {
    *out_len = in_len - 1;
    if (out_cap < in_len - 1) return CAIRN_PLUGIN_SHORT_BUFFER;
    if (in_len > 1) memcpy(out, in + 1, in_len - 1);
    return 1;
  }
  if (in[0] != FRAME_COMPRESSED || in_len < FRAME_HEAD) {
    return frame_error(err, err_len, "frame type %u of %zu bytes is not one this plugin writes", in[0], in_len);
  }
  *length = frame_get_length(in + 1);
  *out_len = (size_t)*length;
  if ((uint64_t)(size_t)*length != *length) return frame_error(err, err_len, "a frame of %llu bytes", (unsigned long long)*length);
  if (out_cap < *length) return CAIRN_PLUGIN_SHORT_BUFFER;
  return CAIRN_PLUGIN_OK;
}

#endif /* CAIRN_PLUGINS_FRAME_H */
