/* compress=zstd, zstd-N and auto: Zstandard at a level (parameter level=N, default 3), stored raw
 * when that does not make a segment smaller. With "probe" (compress=auto) a 64 KiB sample is
 * compressed at level 1 first, and data that does not shrink is stored raw without the full
 * compression, so random data costs little more than a copy. */
#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>

#include "../common/frame.h"

enum { PROBE_SAMPLE = 64 * 1024, KEPT_CONTEXTS = 8 };

/* Contexts are kept for the next call (setting one up costs about as much as compressing
 * 64 KiB); calls on several threads at once each take their own. At most KEPT_CONTEXTS stay:
 * at level 19 one holds tens of MiB. */
struct zstd_instance {
  int level;
  int probe;
  pthread_mutex_t lock;
  ZSTD_CCtx *cctx[KEPT_CONTEXTS];
  int ncctx;
  ZSTD_DCtx *dctx[KEPT_CONTEXTS];
  int ndctx;
};

static ZSTD_CCtx *take_cctx(struct zstd_instance *inst) {
  pthread_mutex_lock(&inst->lock);
  ZSTD_CCtx *c = inst->ncctx ? inst->cctx[--inst->ncctx] : NULL;
  pthread_mutex_unlock(&inst->lock);
  return c ? c : ZSTD_createCCtx();
}
static void give_cctx(struct zstd_instance *inst, ZSTD_CCtx *c) {
  pthread_mutex_lock(&inst->lock);
  if (inst->ncctx < KEPT_CONTEXTS) inst->cctx[inst->ncctx++] = c, c = NULL;
  pthread_mutex_unlock(&inst->lock);
  ZSTD_freeCCtx(c);
}
static ZSTD_DCtx *take_dctx(struct zstd_instance *inst) {
  pthread_mutex_lock(&inst->lock);
  ZSTD_DCtx *d = inst->ndctx ? inst->dctx[--inst->ndctx] : NULL;
  pthread_mutex_unlock(&inst->lock);
  return d ? d : ZSTD_createDCtx();
}
static void give_dctx(struct zstd_instance *inst, ZSTD_DCtx *d) {
  pthread_mutex_lock(&inst->lock);
  if (inst->ndctx < KEPT_CONTEXTS) inst->dctx[inst->ndctx++] = d, d = NULL;
  pthread_mutex_unlock(&inst->lock);
  ZSTD_freeDCtx(d);
}

static void *zstd_init(const char *params, char *err, size_t err_len) {
  struct zstd_instance inst = {.level = 3, .probe = 0};
  char buf[128];
  if (strlen(params) >= sizeof buf) {
    frame_error(err, err_len, "parameters too long");
    return NULL;
  }
  strcpy(buf, params);
  for (char *save = NULL, *term = strtok_r(buf, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
    char *end = NULL;
    if (strncmp(term, "level=", 6) == 0) {
      long level = strtol(term + 6, &end, 10);
      if (end == term + 6 || *end || level < 1 || level > ZSTD_maxCLevel()) {
        frame_error(err, err_len, "'%s': the level is 1..%d", term, ZSTD_maxCLevel());
        return NULL;
      }
      inst.level = (int)level;
    } else if (strcmp(term, "probe") == 0) {
      inst.probe = 1;
    } else {
      frame_error(err, err_len, "unknown parameter '%s' (known: level=N, probe)", term);
      return NULL;
    }
  }
  struct zstd_instance *made = malloc(sizeof *made);
  if (!made) {
    frame_error(err, err_len, "out of memory");
    return NULL;
  }
  *made = inst;
  pthread_mutex_init(&made->lock, NULL);
  return made;
}

static size_t zstd_max_encoded_size(void *instance, size_t in_len) {
  (void)instance;
  size_t bound = ZSTD_compressBound(in_len);
  return FRAME_HEAD + (bound > in_len ? bound : in_len);
}

static int zstd_encode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                       size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)call;
  struct zstd_instance *inst = instance;
  if (out_cap < zstd_max_encoded_size(instance, in_len)) return frame_error(err, err_len, "output buffer too small");
  ZSTD_CCtx *cctx = take_cctx(inst);
  if (!cctx) return frame_error(err, err_len, "zstd: out of memory");
  if (inst->probe && in_len > PROBE_SAMPLE) {
    /* the sample's compressed form goes where the real one will, and is overwritten */
    size_t sample = ZSTD_compressCCtx(cctx, out + FRAME_HEAD, out_cap - FRAME_HEAD, in, PROBE_SAMPLE, 1);
    if (ZSTD_isError(sample) || sample > PROBE_SAMPLE / 100 * 97) {
      give_cctx(inst, cctx);
      if (ZSTD_isError(sample)) return frame_error(err, err_len, "zstd: %s", ZSTD_getErrorName(sample));
      return frame_store_raw(in, in_len, out, out_len);
    }
  }
  size_t n = ZSTD_compressCCtx(cctx, out + FRAME_HEAD, out_cap - FRAME_HEAD, in, in_len, inst->level);
  give_cctx(inst, cctx);
  if (ZSTD_isError(n)) return frame_error(err, err_len, "zstd: %s", ZSTD_getErrorName(n));
  if (n + FRAME_HEAD > in_len) return frame_store_raw(in, in_len, out, out_len);
  out[0] = FRAME_COMPRESSED;
  frame_put_length(out + 1, in_len);
  *out_len = n + FRAME_HEAD;
  return CAIRN_PLUGIN_OK;
}

static int zstd_decode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                       size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)call;
  uint64_t length = 0;
  int rc = frame_open(in, in_len, out, out_cap, out_len, &length, err, err_len);
  if (rc != CAIRN_PLUGIN_OK) return rc == 1 ? CAIRN_PLUGIN_OK : rc;
  ZSTD_DCtx *dctx = take_dctx(instance);
  if (!dctx) return frame_error(err, err_len, "zstd: out of memory");
  size_t n = ZSTD_decompressDCtx(dctx, out, (size_t)length, in + FRAME_HEAD, in_len - FRAME_HEAD);
  give_dctx(instance, dctx);
  if (ZSTD_isError(n)) return frame_error(err, err_len, "zstd: %s", ZSTD_getErrorName(n));
  if (n != length) return frame_error(err, err_len, "zstd: %zu bytes decoded, the frame says %llu", n,
                                      (unsigned long long)length);
  return CAIRN_PLUGIN_OK;
}

static void zstd_destroy(void *instance) {
  struct zstd_instance *inst = instance;
  while (inst->ncctx) ZSTD_freeCCtx(inst->cctx[--inst->ncctx]);
  while (inst->ndctx) ZSTD_freeDCtx(inst->dctx[--inst->ndctx]);
  pthread_mutex_destroy(&inst->lock);
  free(inst);
}

static const struct cairn_plugin kZstd = {
    .abi_version = CAIRN_PLUGIN_ABI_VERSION,
    .name = "zstd",
    .version = 1,
    .stage = CAIRN_PLUGIN_STAGE_COMPRESS,
    .flags = CAIRN_PLUGIN_CHANGES_SIZE,
    .summary = "Zstandard compression (compress=zstd, zstd-N, auto)",
    .init = zstd_init,
    .max_encoded_size = zstd_max_encoded_size,
    .encode = zstd_encode,
    .decode = zstd_decode,
    .destroy = zstd_destroy,
};

const struct cairn_plugin *cairn_plugin_entry(void) { return &kZstd; }
