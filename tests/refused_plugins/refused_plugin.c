/* Test only: modules cairn must refuse, one per build (-DREFUSE_OLD_ABI or -DREFUSE_DUPLICATE):
 * one speaking ABI version 0, one taking the name of the built-in lz4. Never loaded by a daemon. */
#include <stddef.h>

#include "cairn/plugin.h"

static void *refused_init(const char *params, char *err, size_t err_len) {
  (void)params;
  (void)err;
  (void)err_len;
  return NULL;
}
static size_t refused_max(void *instance, size_t n) {
  (void)instance;
  return n;
}
static int refused_code(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                        size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)instance, (void)call, (void)in, (void)in_len, (void)out, (void)out_cap, (void)out_len, (void)err, (void)err_len;
  return CAIRN_PLUGIN_ERROR;
}
static void refused_destroy(void *instance) { (void)instance; }

static const struct cairn_plugin kRefused = {
#ifdef REFUSE_OLD_ABI
    .abi_version = 0,
    .name = "test-old-abi",
#else
    .abi_version = CAIRN_PLUGIN_ABI_VERSION,
    .name = "lz4",
#endif
    .version = 1,
    .stage = CAIRN_PLUGIN_STAGE_CUSTOM,
    .summary = "refused by design",
    .init = refused_init,
    .max_encoded_size = refused_max,
    .encode = refused_code,
    .decode = refused_code,
    .destroy = refused_destroy,
};

const struct cairn_plugin *cairn_plugin_entry(void) { return &kRefused; }
