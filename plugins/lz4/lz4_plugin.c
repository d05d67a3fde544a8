/* compress=lz4: LZ4 (its default, fast mode), stored raw when that does not make a segment
 * smaller. No parameters. */
#include <limits.h>
#include <lz4.h>
#include <stdlib.h>

#include "../common/frame.h"

static void *lz4_init(const char *params, char *err, size_t err_len) {
  if (params[0]) {
    frame_error(err, err_len, "lz4 takes no parameters, not '%s'", params);
    return NULL;
  }
  static int instance; /* stateless: any non-NULL pointer */
  return &instance;
}

static size_t lz4_max_encoded_size(void *instance, size_t in_len) {
  (void)instance;
  size_t bound = in_len <= LZ4_MAX_INPUT_SIZE ? (size_t)LZ4_compressBound((int)in_len) : 0;
  return FRAME_HEAD + (bound > in_len ? bound : in_len);
}

static int lz4_encode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                      size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)call;
  if (out_cap < lz4_max_encoded_size(instance, in_len)) return frame_error(err, err_len, "output buffer too small");
  if (in_len > LZ4_MAX_INPUT_SIZE) return frame_store_raw(in, in_len, out, out_len);
  size_t room = out_cap - FRAME_HEAD < INT_MAX ? out_cap - FRAME_HEAD : INT_MAX;
  int n = LZ4_compress_default((const char *)in, (char *)out + FRAME_HEAD, (int)in_len, (int)room);
  if (n <= 0) return frame_error(err, err_len, "lz4: compression failed");
  if ((size_t)n + FRAME_HEAD > in_len) return frame_store_raw(in, in_len, out, out_len);
  out[0] = FRAME_COMPRESSED;
  frame_put_length(out + 1, in_len);
  *out_len = (size_t)n + FRAME_HEAD;
  return CAIRN_PLUGIN_OK;
}

static int lz4_decode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                      size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)instance;
  (void)call;
  uint64_t length = 0;
  int rc = frame_open(in, in_len, out, out_cap, out_len, &length, err, err_len);
  if (rc != CAIRN_PLUGIN_OK) return rc == 1 ? CAIRN_PLUGIN_OK : rc;
  if (length > INT_MAX || in_len - FRAME_HEAD > INT_MAX) return frame_error(err, err_len, "lz4: frame too large");
  int n = LZ4_decompress_safe((const char *)in + FRAME_HEAD, (char *)out, (int)(in_len - FRAME_HEAD), (int)length);
  if (n < 0 || (uint64_t)n != length) return frame_error(err, err_len, "lz4: damaged data");
  return CAIRN_PLUGIN_OK;
}

static void lz4_destroy(void *instance) { (void)instance; }

static const struct cairn_plugin kLz4 = {
    .abi_version = CAIRN_PLUGIN_ABI_VERSION,
    .name = "lz4",
    .version = 1,
    .stage = CAIRN_PLUGIN_STAGE_COMPRESS,
    .flags = CAIRN_PLUGIN_CHANGES_SIZE,
    .summary = "LZ4 compression (compress=lz4)",
    .init = lz4_init,
    .max_encoded_size = lz4_max_encoded_size,
    .encode = lz4_encode,
    .decode = lz4_decode,
    .destroy = lz4_destroy,
};

const struct cairn_plugin *cairn_plugin_entry(void) { return &kLz4; }
