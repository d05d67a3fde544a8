/* encrypt=aes-256-gcm: authenticated encryption of each extent's payload with the file's data
 * key (OpenSSL). Output, version 1:
 *   nonce (12 bytes, fresh from the CSPRNG for every encode) | ciphertext (as long as the input) | tag (16)
 * The associated data binds it to where it belongs:
 *   "cairn-aes-256-gcm" | archive id (16) | file id (u64 LE) | segment version (u64 LE)
 * so a payload read back from another archive, file or extent (an older write of the same
 * segment included) fails authentication. See cairn-plugins(7). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "cairn/plugin.h"

enum { KEY_BYTES = 32, NONCE_BYTES = 12, TAG_BYTES = 16, OVERHEAD = NONCE_BYTES + TAG_BYTES };
static const char AAD_LABEL[] = "cairn-aes-256-gcm";
enum { AAD_BYTES = sizeof AAD_LABEL - 1 + 16 + 8 + 8 };
/* EVP updates take an int length: longer payloads go through in pieces of this size. */
enum { PIECE = 1 << 30 };

static int fail(char *err, size_t err_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
  return CAIRN_PLUGIN_ERROR;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void make_aad(const struct cairn_call *call, uint8_t aad[AAD_BYTES]) {
  size_t at = sizeof AAD_LABEL - 1;
  memcpy(aad, AAD_LABEL, at);
  if (call->archive_id) {
    memcpy(aad + at, call->archive_id, 16);
  } else {
    memset(aad + at, 0, 16);
  }
  put_u64(aad + at + 16, call->file_id);
  put_u64(aad + at + 24, call->segment_version);
}

/* Runs in[0..len) through ctx into out; 0 on failure. */
static int update_all(EVP_CIPHER_CTX *ctx, int encrypting, const uint8_t *in, size_t len, uint8_t *out) {
  for (size_t done = 0; done < len;) {
    int piece = (int)(len - done < PIECE ? len - done : PIECE);
    int written = 0;
    int ok = encrypting ? EVP_EncryptUpdate(ctx, out + done, &written, in + done, piece)
                        : EVP_DecryptUpdate(ctx, out + done, &written, in + done, piece);
    if (!ok || written != piece) return 0;
    done += (size_t)piece;
  }
  return 1;
}

/* Starts a GCM context with the call's key, `nonce` and associated data; NULL on failure. */
static EVP_CIPHER_CTX *start(const struct cairn_call *call, int encrypting, const uint8_t *nonce) {
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  uint8_t aad[AAD_BYTES];
  make_aad(call, aad);
  int aad_len = 0;
  int ok = ctx && (encrypting ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
                              : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)) &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_BYTES, NULL) &&
           (encrypting ? EVP_EncryptInit_ex(ctx, NULL, NULL, call->key, nonce)
                       : EVP_DecryptInit_ex(ctx, NULL, NULL, call->key, nonce)) &&
           (encrypting ? EVP_EncryptUpdate(ctx, NULL, &aad_len, aad, AAD_BYTES)
                       : EVP_DecryptUpdate(ctx, NULL, &aad_len, aad, AAD_BYTES));
  if (!ok) {
    EVP_CIPHER_CTX_free(ctx);
    return NULL;
  }
  return ctx;
}

static int has_key(const struct cairn_call *call, char *err, size_t err_len) {
  if (call->key && call->key_len == KEY_BYTES) return 1;
  fail(err, err_len, "a %d-byte data key is needed, %zu bytes were given", KEY_BYTES, call->key ? call->key_len : 0);
  return 0;
}

static void *gcm_init(const char *params, char *err, size_t err_len) {
  static int instance; /* stateless: every call brings its key */
  if (params && params[0]) {
    fail(err, err_len, "takes no parameters (the key is chosen with user.cairn.key)");
    return NULL;
  }
  return &instance;
}

static size_t gcm_max_encoded_size(void *instance, size_t in_len) {
  (void)instance;
  return in_len + OVERHEAD;
}

static int gcm_encode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                      size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)instance;
  if (!has_key(call, err, err_len)) return CAIRN_PLUGIN_ERROR;
  if (out_cap < in_len + OVERHEAD) return fail(err, err_len, "output room of %zu bytes is too small", out_cap);
  if (RAND_bytes(out, NONCE_BYTES) != 1) return fail(err, err_len, "the random number generator failed");
  EVP_CIPHER_CTX *ctx = start(call, 1, out);
  int final_len = 0;
  int ok = ctx && update_all(ctx, 1, in, in_len, out + NONCE_BYTES) &&
           EVP_EncryptFinal_ex(ctx, out + NONCE_BYTES + in_len, &final_len) && final_len == 0 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, out + NONCE_BYTES + in_len);
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return fail(err, err_len, "OpenSSL could not encrypt");
  *out_len = in_len + OVERHEAD;
  return CAIRN_PLUGIN_OK;
}

static int gcm_decode(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                      size_t out_cap, size_t *out_len, char *err, size_t err_len) {
  (void)instance;
  if (call->version != 1) return fail(err, err_len, "version %u is not one it wrote", call->version);
  if (!has_key(call, err, err_len)) return CAIRN_PLUGIN_ERROR;
  if (in_len < OVERHEAD) return fail(err, err_len, "%zu bytes are too few for nonce and tag", in_len);
  size_t length = in_len - OVERHEAD;
  if (out_cap < length) {
    *out_len = length;
    return CAIRN_PLUGIN_SHORT_BUFFER;
  }
  uint8_t tag[TAG_BYTES];
  memcpy(tag, in + NONCE_BYTES + length, TAG_BYTES); /* EVP wants a writable tag */
  EVP_CIPHER_CTX *ctx = start(call, 0, in);
  int final_len = 0;
  int ok = ctx && update_all(ctx, 0, in + NONCE_BYTES, length, out) &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, tag);
  int authentic = ok && EVP_DecryptFinal_ex(ctx, out + length, &final_len) > 0;
  EVP_CIPHER_CTX_free(ctx);
  if (!authentic) {
    OPENSSL_cleanse(out, length); /* never hand out what failed authentication */
    return fail(err, err_len,
                ok ? "authentication failed: the bytes were changed, or belong to another file, extent or key"
                   : "OpenSSL could not decrypt");
  }
  *out_len = length;
  return CAIRN_PLUGIN_OK;
}

static void gcm_destroy(void *instance) { (void)instance; }

static const struct cairn_plugin kPlugin = {
    .abi_version = CAIRN_PLUGIN_ABI_VERSION,
    .name = "aes-256-gcm",
    .version = 1,
    .stage = CAIRN_PLUGIN_STAGE_ENCRYPT,
    .flags = CAIRN_PLUGIN_CHANGES_SIZE | CAIRN_PLUGIN_NEEDS_KEY | CAIRN_PLUGIN_AUTHENTICATES,
    .summary = "AES-256-GCM with a fresh random nonce per extent, bound to archive, file and extent",
    .init = gcm_init,
    .max_encoded_size = gcm_max_encoded_size,
    .encode = gcm_encode,
    .decode = gcm_decode,
    .destroy = gcm_destroy,
};

const struct cairn_plugin *cairn_plugin_entry(void) { return &kPlugin; }
