/* tma.c — TMA tensor maps for the warp-specialized entry points (sm_90a).
 *
 * The compiler describes each map in the metadata ("tmap ARG swizzle W box ..."): which tensor
 * argument, the box one copy moves and the shared-memory swizzle it writes. The runtime makes
 * the map from the launch's view of that argument with cuTensorMapEncodeTiled. TMA needs a
 * 16-byte aligned base, strides that are multiples of 16 bytes (below 2^40) and dims below 2^32;
 * out-of-bounds elements read as zero, which is the LOAD's fill (the compiler only uses TMA for
 * zero-filled loads). A view outside these rules falls back to the cp.async entry. */
#include "tilert_internal.h"

#include <string.h>

static bool same_view(const tilert_tensor *a, const tilert_tensor *b) {
  return a->data == b->data && a->rank == b->rank && a->dtype == b->dtype &&
         !memcmp(a->shape, b->shape, sizeof a->shape) && !memcmp(a->strides, b->strides, sizeof a->strides);
}

static bool encode(const tilert_driver *d, const tilert_tmap_info *m, const tilert_tensor *t, CUtensorMap *out) {
  int r = t->rank;
  size_t esize = tilert_dtype_size(t->dtype);
  cuuint64_t dims[TILERT_MAX_RANK], strides[TILERT_MAX_RANK];
  cuuint32_t box[TILERT_MAX_RANK], estride[TILERT_MAX_RANK];
  if ((t->dtype != TILERT_F16 && t->dtype != TILERT_BF16) || ((uintptr_t)t->data & 15) || t->strides[r - 1] != 1)
    return false;
  for (int i = 0; i < r; i++) { /* innermost first */
    int64_t n = t->shape[r - 1 - i];
    if (n < 1 || n > ((int64_t)1 << 32))
      return false;
    dims[i] = (cuuint64_t)n;
    box[i] = (cuuint32_t)m->box[r - 1 - i];
    estride[i] = 1;
    if (i > 0) {
      int64_t s = t->strides[r - 1 - i];
      if (s < 1 || s > ((int64_t)1 << 40) / (int64_t)esize || (s * (int64_t)esize) % 16)
        return false;
      strides[i - 1] = (cuuint64_t)(s * (int64_t)esize);
    }
  }
  CUtensorMapSwizzle sw = m->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                          : m->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                             : CU_TENSOR_MAP_SWIZZLE_32B;
  CUtensorMapDataType dt = t->dtype == TILERT_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUresult res = d->TensorMapEncodeTiled(out, dt, (cuuint32_t)r, t->data, dims, strides, box, estride,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS;
}

bool tilert__tmaps_bind(const tilert_driver *d, tilert_kernel *k, const tilert_arg *args) {
  tilert_tmaps *c = k->tmaps;
  const tilert_kernel_info *info = &k->info;
  bool same = c->valid != 0;
  for (int i = 0; i < info->ntmaps && same; i++)
    same = same_view(&c->key[i], &args[info->tmaps[i].arg].tensor);
  if (same)
    return c->valid > 0;
  c->valid = 1;
  for (int i = 0; i < info->ntmaps; i++) {
    c->key[i] = args[info->tmaps[i].arg].tensor;
    if (c->valid > 0 && !encode(d, &info->tmaps[i], &c->key[i], &c->map[i]))
      c->valid = -1;
  }
  return c->valid > 0;
}
