/* xor-whiten: an example cairn transform plugin, built outside cairn's tree against the
 * installed <cairn/plugin.h>. It XORs every byte with a keystream from a small PRNG seeded by
 * its parameter seed=N, so the bytes on the disks do not look like the file.
 *
 * NOT SECURITY. Anyone can undo it: the seed is written in every extent's header. It shows the
 * plugin ABI (init, encode, decode, destroy, parameters, versions); use encrypt= for secrecy. */
#include <cairn/plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct whiten {
  uint64_t seed;
};

static void *whiten_init(const char *params, char *err, size_t err_len) {
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  if (params[0]) {
    char *end = NULL;
    if (strncmp(params, "seed=", 5) != 0 || !params[5] || (seed = strtoull(params + 5, &end, 10), *end)) {
      snprintf(err, err_len, "parameters '%s': expected seed=N", params);
      return NULL;
    }
  }
  struct whiten *w = malloc(sizeof *w);
  if (!w) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  w->seed = seed;
  return w;
}

static size_t whiten_max_encoded_size(void *instance, size_t in_len) {
  (void)instance;
  return in_len;
}

/* splitmix64: each 8 bytes of the stream from the position, so any range can be (un)done. */
static void whiten(const struct whiten *w, const uint8_t *in, size_t len, uint8_t *out) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t z = w->seed + (i / 8 + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t k = 0; k < 8 && i + k < len; k++) out[i + k] = in[i + k] ^ (uint8_t)(z >> (8 * k));
  }
}

static int whiten_code(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                       size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)call;
  *out_len = in_len;
  if (out_cap < in_len) return CAIRN_PLUGIN_SHORT_BUFFER;
  (void)err, (void)err_len;
  whiten(instance, in, in_len, out);
  return CAIRN_PLUGIN_OK;
}

static void whiten_destroy(void *instance) { free(instance); }

static const struct cairn_plugin kWhiten = {
    .abi_version = CAIRN_PLUGIN_ABI_VERSION,
    .name = "xor-whiten",
    .version = 1,
    .stage = CAIRN_PLUGIN_STAGE_CUSTOM,
    .flags = 0,
    .summary = "example: XOR with a seeded keystream (NOT security)",
    .init = whiten_init,
    .max_encoded_size = whiten_max_encoded_size,
    .encode = whiten_code,
    .decode = whiten_code,
    .destroy = whiten_destroy,
};

const struct cairn_plugin *cairn_plugin_entry(void) { return &kWhiten; }
