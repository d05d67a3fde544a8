/* cairn transform plugins: the C ABI a loadable module implements to change segment data on its
 * way to the disks (compression, encryption, custom transforms) and back. See cairn-plugins(7).
 *
 * A module is a shared object in cairn's plugin directory that exports
 *
 *     const struct cairn_plugin *cairn_plugin_entry(void);
 *
 * returning a description that lives as long as the module. cairn refuses a module whose
 * abi_version is not CAIRN_PLUGIN_ABI_VERSION, or whose name another module already took.
 * Everything here is plain C; no C++ type crosses the boundary. */
#ifndef CAIRN_PLUGIN_H
#define CAIRN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a structure below changes shape or meaning. */
#define CAIRN_PLUGIN_ABI_VERSION 1

/* Where a plugin runs in a file's chain; the order is fixed: compress, then encrypt, then custom
 * (then cairn's checksum, redundancy and intra-disk parity). */
enum cairn_plugin_stage {
  CAIRN_PLUGIN_STAGE_COMPRESS = 1, /* selected by user.cairn.compress */
  CAIRN_PLUGIN_STAGE_ENCRYPT = 2,  /* selected by user.cairn.encrypt */
  CAIRN_PLUGIN_STAGE_CUSTOM = 3    /* selected by user.cairn.plugins */
};

/* Flags. */
#define CAIRN_PLUGIN_CHANGES_SIZE 0x1u  /* its output may be longer or shorter than its input */
#define CAIRN_PLUGIN_NEEDS_KEY 0x2u     /* it reads call->key */
#define CAIRN_PLUGIN_AUTHENTICATES 0x4u /* decode detects any change of its output */

/* Return codes of encode and decode. */
#define CAIRN_PLUGIN_OK 0
#define CAIRN_PLUGIN_ERROR (-1)        /* message in the err buffer */
#define CAIRN_PLUGIN_SHORT_BUFFER (-2) /* decode: *out_len says how many bytes out must hold */

/* What one call transforms: an extent's payload, one file segment or several packed together.
 * A NEEDS_KEY plugin gets the data's identity below with the key, and binds its output to it
 * (e.g. as AEAD associated data), so bytes moved to another place, file or write fail to
 * decode: cairn gives decode exactly what it gave encode. Every other plugin gets `version`
 * only (the identity NULL and 0). */
struct cairn_call {
  const uint8_t *archive_id; /* 16 bytes: the archive's id */
  uint64_t file_id;          /* the inode whose data key seals it (an encrypted extent holds one
                                file's data) */
  uint64_t segment_index;    /* reserved: 0 (segment_version identifies the extent) */
  uint64_t segment_version;  /* the extent's id: never the same for two writes in one archive, and
                                recorded by the catalog for every segment the extent holds */
  const uint8_t *key;        /* NEEDS_KEY plugins: the file's data key (32 bytes), else NULL */
  size_t key_len;
  uint32_t version;          /* decode: the version of the plugin that encoded it; encode: its own */
};

struct cairn_plugin {
  uint32_t abi_version; /* CAIRN_PLUGIN_ABI_VERSION */
  const char *name;     /* [a-z][a-z0-9-]{0,31}; what policies name */
  uint32_t version;     /* of its output; it must decode every version from 1 up to this one */
  uint32_t stage;       /* enum cairn_plugin_stage */
  uint32_t flags;       /* CAIRN_PLUGIN_* */
  const char *summary;  /* one line for `cairn plugins` */

  /* An instance for `params` ("" or "k=v,k=v", no spaces; recorded in every extent it encodes).
   * NULL with a message in err (NUL-terminated, at most err_len bytes) when params are wrong. */
  void *(*init)(const char *params, char *err, size_t err_len);
  /* The most bytes encode may produce from in_len bytes. */
  size_t (*max_encoded_size)(void *instance, size_t in_len);
  /* Transforms in[0..in_len) into out (out_cap = max_encoded_size(in_len) bytes), sets *out_len.
   * out holds leftover bytes (of other data) until written: write every one of the *out_len
   * bytes. Called from several threads at once on one instance. */
  int (*encode)(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                size_t out_cap, size_t *out_len, char *err, size_t err_len);
  /* Undoes encode (of call->version) into out: out_cap is the most the data can decode to, so
   * CAIRN_PLUGIN_SHORT_BUFFER (with *out_len) says it is damaged; CAIRN_PLUGIN_ERROR when in is
   * not something it made. Like encode, it writes every one of the *out_len bytes it reports
   * (out holds other files' bytes before). Thread-safe like encode. */
  int (*decode)(void *instance, const struct cairn_call *call, const uint8_t *in, size_t in_len, uint8_t *out,
                size_t out_cap, size_t *out_len, char *err, size_t err_len);
  void (*destroy)(void *instance);
};

typedef const struct cairn_plugin *(*cairn_plugin_entry_fn)(void);
#define CAIRN_PLUGIN_ENTRY "cairn_plugin_entry"

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_PLUGIN_H */
