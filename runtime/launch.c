/* launch.c — modules and kernels, and the one launch call for both backends.
 *
 * Kernel ABI (what the compiler emits): for each argument in order, a tensor is its u64 device
 * address followed by rank-1 s64 strides (elements) of dims 0..rank-2 (the innermost is 1 and not
 * passed); a scalar is an f32 or s32. Then one s32 per run-time (not pinned) dim, in the order of
 * the metadata's "dim" lines. */
#include "tilert_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  JIT_LOG_BYTES = 8192,
  DEFAULT_SMEM_LIMIT = 48 * 1024, /* above this a kernel must opt in */
  MAX_PARAMS = TILERT_MAX_ARGS * TILERT_MAX_RANK + TILERT_MAX_DIMS + TILERT_MAX_TMAPS + 4,
};

/* ---------------------------------------------------------------- modules */

/* Keeps only the "// tilec:" lines: all later kernel lookups need, without holding the PTX. */
static char *copy_meta_lines(const char *ptx) {
  size_t cap = 1, used = 0;
  for (const char *p = strstr(ptx, "// tilec:"); p; p = strstr(p + 1, "// tilec:"))
    cap += strcspn(p, "\n") + 1;
  char *out = malloc(cap);
  if (!out)
    return NULL;
  for (const char *p = strstr(ptx, "// tilec:"); p; p = strstr(p + 1, "// tilec:")) {
    size_t n = strcspn(p, "\n");
    memcpy(out + used, p, n);
    used += n;
    out[used++] = '\n';
  }
  out[used] = '\0';
  return out;
}

/* The next `.entry NAME` of ptx from p on, outside `//` comments: where it starts (NULL: none),
 * its name in *name, *len. */
static const char *next_entry(const char *ptx, const char *p, const char **name, size_t *len) {
  for (p = strstr(p, ".entry"); p; p = strstr(p + 1, ".entry")) {
    const char *line = p;
    while (line > ptx && line[-1] != '\n')
      line--;
    const char *comment = strstr(line, "//");
    if ((comment && comment < p) || !isspace((unsigned char)p[6]))
      continue;
    *name = p + 6 + strspn(p + 6, " \t\r\n");
    if ((*len = strcspn(*name, " \t\r\n(")))
      return p;
  }
  return NULL;
}

/* The `.param`s of the parameter list "( ... )" at q (after blanks), or -1 when there is none. */
static int count_params(const char *q) {
  q += strspn(q, " \t\r\n");
  if (*q != '(')
    return -1;
  int count = 0;
  for (q++; *q && *q != ')'; q++)
    if (!strncmp(q, ".param", 6) && isspace((unsigned char)q[6]))
      count++;
  return *q == ')' ? count : -1;
}

int tilert__ptx_param_count(const char *ptx, const char *name) {
  const char *e;
  size_t len;
  for (const char *p = ptx; (p = next_entry(ptx, p, &e, &len)); p++)
    if (len == strlen(name) && !strncmp(e, name, len))
      return count_params(e + len);
  return -1;
}

/* "NAME COUNT\n" for each entry point of ptx: the parameter counts check_params compares with the
 * metadata's, kept (as the metadata is) without the PTX. */
static char *entry_table(const char *ptx) {
  const char *e;
  size_t cap = 1, used = 0, len;
  for (const char *p = ptx; (p = next_entry(ptx, p, &e, &len)); p++)
    cap += len + 16;
  char *out = malloc(cap);
  if (!out)
    return NULL;
  out[0] = '\0';
  for (const char *p = ptx; (p = next_entry(ptx, p, &e, &len)); p++)
    used += (size_t)snprintf(out + used, cap - used, "%.*s %d\n", (int)len, e, count_params(e + len));
  return out;
}

/* The count entry_table recorded for entry point name, or -1. */
static int table_params(const char *table, const char *name) {
  size_t n = strlen(name);
  for (const char *p = table; p && *p; p = strchr(p, '\n') + 1)
    if (!strncmp(p, name, n) && p[n] == ' ')
      return atoi(p + n + 1);
  return -1;
}

/* Trims the JIT log to one line of status message: newlines become "; ". */
static void flatten_log(char *log) {
  size_t n = strlen(log);
  while (n && (log[n - 1] == '\n' || log[n - 1] == ' '))
    log[--n] = '\0';
  for (char *p = log; *p; p++)
    if (*p == '\n')
      *p = ' ';
}

tilert_status tilert_module_load_ptx(tilert_device *dev, const char *ptx, tilert_module **out) {
  if (!dev || !ptx || !out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_module_load_ptx: NULL argument");
  *out = NULL;
  if (dev->backend != TILERT_BACKEND_GPU)
    return tilert__err(TILERT_ERROR_UNSUPPORTED,
                       "tilert_module_load_ptx: the CPU backend runs kernels with "
                       "tilert_kernel_create_cpu, not PTX");
  tilert_kernel_info *probe = malloc(sizeof *probe);
  if (!probe)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  tilert_status st = tilert_parse_kernel_info(ptx, probe); /* reject PTX without metadata early */
  free(probe);
  if (st.code)
    return st;
  const tilert_driver *d;
  if ((st = tilert__gpu_enter(dev, &d)).code)
    return st;
  tilert_module *m = calloc(1, sizeof *m);
  char *log = calloc(1, JIT_LOG_BYTES);
  if (!m || !log || !(m->meta = copy_meta_lines(ptx)) || !(m->entries = entry_table(ptx))) {
    free(m ? m->meta : NULL), free(m ? m->entries : NULL), free(m), free(log);
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  /* The driver may fill all the bytes it is given with no NUL: it gets one less than the buffer,
   * whose last byte (calloc) stays the terminator. */
  CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *val[2] = {log, (void *)(uintptr_t)(JIT_LOG_BYTES - 1)};
  CUresult r = d->ModuleLoadDataEx(&m->mod, ptx, 2, opt, val);
  if (r != CUDA_SUCCESS) {
    flatten_log(log);
    st = tilert__drv_err("cuModuleLoadDataEx", r, log);
    free(m->meta), free(m->entries), free(m), free(log);
    return st;
  }
  free(log);
  m->dev = dev;
  *out = m;
  return tilert__ok();
}

/* Checks what the device can give an entry point and opts in to large dynamic shared memory. */
static tilert_status gpu_prepare(const tilert_driver *d, tilert_device *dev, CUfunction fn, const char *name,
                                 int threads, int smem) {
  if (smem > dev->max_smem_optin)
    return tilert__err(TILERT_ERROR_UNSUPPORTED,
                       "kernel '%s' needs %d bytes of dynamic shared memory; %s allows %d", name, smem,
                       dev->name, dev->max_smem_optin);
  if (smem > DEFAULT_SMEM_LIMIT)
    TILERT_CU("cuFuncSetAttribute", d->FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  int max_threads = 0;
  TILERT_CU("cuFuncGetAttribute", d->FuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn));
  if (max_threads < threads)
    return tilert__err(TILERT_ERROR_UNSUPPORTED,
                       "kernel '%s' is launched with %d threads but can run at most %d per "
                       "block (registers)",
                       name, threads, max_threads);
  return tilert__ok();
}

static tilert_status check_params(const tilert_driver *d, const tilert_module *m, CUfunction fn, tilert_kernel *k,
                                  bool ws, const char *entry);

static tilert_status get_function(const tilert_driver *d, tilert_module *m, const char *name, CUfunction *fn) {
  CUresult r = d->ModuleGetFunction(fn, m->mod, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    tilert_status st = tilert__drv_err("cuModuleGetFunction", r, "the metadata names a kernel the PTX lacks");
    st.code = TILERT_ERROR_NOT_FOUND;
    return st;
  }
  return r == CUDA_SUCCESS ? tilert__ok() : tilert__drv_err("cuModuleGetFunction", r, name);
}

/* The warp-specialized entry, when the module has one, the device runs sm_90a code and
 * TILERT_WS is not 0. The device refusing its resources is no error: the cp.async entry runs. */
static tilert_status prepare_ws(const tilert_driver *d, tilert_module *m, tilert_kernel *k) {
  const char *env = getenv("TILERT_WS");
  if (!k->info.ws_name[0] || m->dev->cc != 90 || (env && !strcmp(env, "0")))
    return tilert__ok();
  CUfunction fn;
  tilert_status st = get_function(d, m, k->info.ws_name, &fn);
  if (st.code)
    return st;
  if (gpu_prepare(d, m->dev, fn, k->info.ws_name, k->info.ws_threads, k->info.ws_smem_bytes).code)
    return tilert__ok();
  /* The cp.async entry when it keeps more than 2.5 times as many of the kernel's blocks
   * resident (a 64 x 64 GEMM: 8 blocks an SM against 2, 1.6x faster there); else the
   * warp-specialized one, which beat 2 to 2.5 times its blocks on the H200 (run ag2: 4-warp
   * GEMMs of 128 x 64 and d64 attention by 3-34%). TILERT_WS=1 takes it regardless. */
  int ws_per_sm = 0, cp_per_sm = 0;
  TILERT_CU("cuOccupancyMaxActiveBlocksPerMultiprocessor",
            d->OccupancyMaxActiveBlocksPerMultiprocessor(&ws_per_sm, fn, k->info.ws_threads, (size_t)k->info.ws_smem_bytes));
  TILERT_CU("cuOccupancyMaxActiveBlocksPerMultiprocessor",
            d->OccupancyMaxActiveBlocksPerMultiprocessor(&cp_per_sm, k->fn, k->info.threads, (size_t)k->info.smem_bytes));
  if (5 * ws_per_sm * k->info.ws_groups < 2 * cp_per_sm && !(env && !strcmp(env, "1")))
    return tilert__ok();
  int per_sm = 0;
  if (k->info.ws_persistent) {
    const char *pe = getenv("TILERT_PERSISTENT");
    TILERT_CU("cuOccupancyMaxActiveBlocksPerMultiprocessor",
              d->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, k->info.ws_threads, (size_t)k->info.ws_smem_bytes));
    int resident = per_sm * m->dev->sms;
    if (k->info.ws_cluster == 2) { /* clusters fit the GPCs, not just the SMs */
      CUlaunchAttribute at = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, .value.clusterDim = {2, 1, 1}};
      CUlaunchConfig cfg = {.gridDimX = 2 * (unsigned)resident, .gridDimY = 1, .gridDimZ = 1,
                            .blockDimX = (unsigned)k->info.ws_threads, .blockDimY = 1, .blockDimZ = 1,
                            .sharedMemBytes = (unsigned)k->info.ws_smem_bytes, .attrs = &at, .numAttrs = 1};
      int clusters = 0;
      TILERT_CU("cuOccupancyMaxActiveClusters", d->OccupancyMaxActiveClusters(&clusters, fn, &cfg));
      resident = 2 * clusters;
      per_sm = clusters;
    }
    if (per_sm < 1)
      return tilert__ok(); /* cannot be resident at all: the cp.async entry */
    k->ws_blocks = pe && !strcmp(pe, "0") ? 0 : resident;
    const char *ge = getenv("TILERT_TILE_GROUP");
    k->tile_group = ge && atoi(ge) >= 1 ? atoi(ge) : k->info.ws_tile_group;
    const char *we = getenv("TILERT_PERSISTENT_WAVES");
    k->walk_waves = we && atoi(we) >= 1 ? atoi(we) : 0;
    const char *ce = getenv("TILERT_WALK_CHUNK");
    k->walk_chunk = ce && *ce ? (atoi(ce) > 0 ? atoi(ce) : 0) : -1;
  }
  if (!(k->tmaps = calloc(1, sizeof *k->tmaps)))
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  pthread_mutex_init(&k->tmaps->lock, NULL);
  if ((st = check_params(d, m, fn, k, true, k->info.ws_name)).code)
    return st;
  k->ws_fn = fn;
  return tilert__ok();
}

/* The full-size entry, when the module has one and TILERT_FULL is not 0: what it pins, by the
 * names of k's run-time dims. An entry the device refuses (its registers, say) is no error: k
 * runs every launch, which computes the same. */
static tilert_status get_kernel(tilert_module *m, const char *name, bool with_full, tilert_kernel **out);

static tilert_status prepare_full(tilert_module *m, tilert_kernel *k) {
  const char *env = getenv("TILERT_FULL");
  if (!k->info.full_name[0] || (env && !strcmp(env, "0")))
    return tilert__ok();
  /* one level: an entry's own `full` line (which would only come from metadata naming entries in
   * a cycle) is not followed */
  tilert_kernel *f;
  if (get_kernel(m, k->info.full_name, false, &f).code)
    return tilert__ok();
  bool pins = false;
  for (int i = 0; i < k->info.ndims; i++) {
    const tilert_dim_info *di = &k->info.dims[i];
    k->full_dims[i] = -1;
    for (int j = 0; j < f->info.ndims && !di->pinned; j++)
      if (f->info.dims[j].pinned && !strcmp(f->info.dims[j].name, di->name))
        k->full_dims[i] = f->info.dims[j].value, pins = true;
  }
  if (!pins || f->info.nargs != k->info.nargs)
    return tilert__err(TILERT_ERROR_BAD_METADATA, "kernel '%s': its full-size entry '%s' pins none "
                       "of its dims or takes other arguments", k->info.name, f->info.name);
  k->full = f;
  return tilert__ok();
}

/* A tensor an aligned entry can take: its base and its strides but the last in 16-byte steps. */
static bool tensor_aligned(const tilert_tensor *t) {
  if ((uintptr_t)t->data % 16)
    return false;
  for (int d = 0; d + 1 < t->rank; d++)
    if (t->strides[d] * (int64_t)tilert_dtype_size(t->dtype) % 16)
      return false;
  return true;
}

int tilert__first_unaligned(const tilert_kernel_info *info, const tilert_arg *args) {
  for (int i = 0; i < info->nargs; i++)
    if (info->args[i].kind == TILERT_ARG_TENSOR && !tensor_aligned(&args[i].tensor))
      return i;
  return -1;
}

tilert_status tilert__unaligned_err(const tilert_kernel_info *info, int i) {
  return tilert__err(TILERT_ERROR_SHAPE, "%s: compiled for tensors on 16-byte boundaries whose strides "
                     "are multiples of 16 bytes (TILEC_ALIGNED_ARGS=1); argument '%s' is not",
                     info->name, info->args[i].name);
}

tilert_kernel *tilert__entry_for(tilert_kernel *k, const tilert_arg *args, const int64_t *dims) {
  if (!k->full)
    return k;
  for (int i = 0; i < k->info.ndims; i++)
    if (k->full_dims[i] >= 0 && dims[i] != k->full_dims[i])
      return k;
  return k->full->info.aligned && tilert__first_unaligned(&k->full->info, args) >= 0 ? k : k->full;
}

tilert_status tilert__bind_entry(tilert_kernel **k, const tilert_arg *args, int nargs, int64_t *dims,
                                 int64_t grid[3]) {
  tilert_status st = tilert__bind_kernel(*k, args, nargs, dims, grid);
  int bad = st.code || !(*k)->info.aligned ? -1 : tilert__first_unaligned(&(*k)->info, args);
  if (bad >= 0)
    return tilert__unaligned_err(&(*k)->info, bad);
  tilert_kernel *e = st.code ? *k : tilert__entry_for(*k, args, dims);
  if (e == *k)
    return st;
  *k = e; /* its dims and grid as that entry has them (the pinned dims are not passed) */
  return tilert__bind_kernel(e, args, nargs, dims, grid);
}

tilert_status tilert_module_get_kernel(tilert_module *m, const char *name, tilert_kernel **out) {
  if (!m || !name || !out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_module_get_kernel: NULL argument");
  return get_kernel(m, name, true, out);
}

/* tilert_module_get_kernel; with_full: also its full-size entry (prepare_full). */
static tilert_status get_kernel(tilert_module *m, const char *name, bool with_full, tilert_kernel **out) {
  *out = NULL;
  for (tilert_kernel *k = m->kernels; k; k = k->next)
    if (strcmp(k->info.name, name) == 0) {
      *out = k;
      return tilert__ok();
    }
  tilert_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  k->dev = m->dev;
  tilert_status st = tilert_parse_kernel_info_named(m->meta, name, &k->info);
  const tilert_driver *d = NULL;
  if (!st.code)
    st = tilert__gpu_enter(m->dev, &d);
  if (!st.code)
    st = get_function(d, m, name, &k->fn);
  if (!st.code)
    st = check_params(d, m, k->fn, k, false, k->info.name);
  if (!st.code)
    st = gpu_prepare(d, m->dev, k->fn, k->info.name, k->info.threads, k->info.smem_bytes);
  if (!st.code)
    st = prepare_ws(d, m, k);
  if (!st.code && with_full)
    st = prepare_full(m, k);
  if (st.code) {
    if (k->tmaps)
      pthread_mutex_destroy(&k->tmaps->lock);
    free(k->tmaps);
    free(k);
    return st;
  }
  k->next = m->kernels;
  m->kernels = k;
  *out = k;
  return st;
}

void tilert_module_unload(tilert_module *m) {
  if (!m)
    return;
  const tilert_driver *d;
  if (!tilert__gpu_enter(m->dev, &d).code)
    d->ModuleUnload(m->mod);
  for (tilert_kernel *k = m->kernels, *next; k; k = next) {
    next = k->next;
    if (k->tmaps)
      pthread_mutex_destroy(&k->tmaps->lock);
    free(k->tmaps);
    free(k);
  }
  free(m->meta);
  free(m->entries);
  free(m);
}

/* ---------------------------------------------------------------- CPU kernels */

tilert_status tilert_kernel_create_cpu(tilert_device *dev, const char *metadata, tilert_cpu_fn fn,
                                       void *ctx, tilert_kernel **out) {
  if (!dev || !metadata || !fn || !out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_kernel_create_cpu: NULL argument");
  *out = NULL;
  if (dev->backend != TILERT_BACKEND_CPU)
    return tilert__err(TILERT_ERROR_UNSUPPORTED,
                       "tilert_kernel_create_cpu needs a CPU device (this one is %s)", dev->name);
  tilert_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  tilert_status st = tilert_parse_kernel_info(metadata, &k->info);
  if (st.code) {
    free(k);
    return st;
  }
  k->dev = dev;
  k->cpu_fn = fn;
  k->cpu_ctx = ctx;
  *out = k;
  return st;
}

void tilert_kernel_destroy_cpu(tilert_kernel *k) {
  if (k && k->cpu_fn)
    free(k);
}

const tilert_kernel_info *tilert_kernel_get_info(const tilert_kernel *k) {
  return k ? &k->info : NULL;
}

/* ---------------------------------------------------------------- launch */

/* Kernel parameters in ABI order; every value gets its own 8-byte slot (a tensor map is passed
 * by reference to where it is cached). size: what the entry point declares, for check_params. */
typedef struct Params {
  uint64_t slot[MAX_PARAMS];
  void *ptr[MAX_PARAMS];
  size_t size[MAX_PARAMS];
  int n;
} Params;

static void push(Params *p, const void *v, size_t size) {
  p->slot[p->n] = 0;
  memcpy(&p->slot[p->n], v, size);
  p->size[p->n] = size;
  p->ptr[p->n] = &p->slot[p->n];
  p->n++;
}

static void push_ref(Params *p, void *v, size_t size) {
  p->size[p->n] = size;
  p->ptr[p->n++] = v;
}

static void marshal(const tilert_kernel_info *info, const tilert_arg *args,
                    const int64_t *dims, Params *p) {
  p->n = 0;
  for (int i = 0; i < info->nargs; i++) {
    const tilert_arg_info *ai = &info->args[i];
    if (ai->kind == TILERT_ARG_TENSOR) {
      uint64_t addr = (uint64_t)(uintptr_t)args[i].tensor.data;
      push(p, &addr, sizeof addr);
      for (int r = 0; r < ai->rank - 1; r++)
        push(p, &args[i].tensor.strides[r], sizeof(int64_t));
    } else if (ai->dtype == TILERT_I32) {
      int32_t v = (int32_t)args[i].scalar;
      push(p, &v, sizeof v);
    } else {
      float v = (float)args[i].scalar;
      push(p, &v, sizeof v);
    }
  }
  for (int d = 0; d < info->ndims; d++)
    if (!info->dims[d].pinned) {
      int32_t v = (int32_t)dims[d];
      push(p, &v, sizeof v);
    }
}

/* The warp-specialized entry's parameters after marshal's: a persistent one's grid and its
 * fourth walk parameter (a row walk's chunk, else the raster group), then the tensor maps, by
 * value: the driver copies the 128 bytes of each. */
static void push_walk(Params *p, const int32_t walk[4]) {
  for (int i = 0; i < 4; i++)
    push(p, &walk[i], sizeof(int32_t));
}

static void push_tmaps(Params *p, tilert_kernel *k) {
  for (int i = 0; i < k->info.ntmaps; i++)
    push_ref(p, &k->tmaps->map[i], sizeof(CUtensorMap));
}

int tilert__launch_params(const tilert_kernel_info *info, bool ws, size_t *sizes) {
  Params *p = malloc(sizeof *p);
  tilert_arg *args = calloc(TILERT_MAX_ARGS, sizeof *args);
  int64_t dims[TILERT_MAX_DIMS] = {0};
  int n = -1;
  if (p && args) {
    marshal(info, args, dims, p);
    if (ws && info->ws_persistent)
      push_walk(p, (int32_t[4]){0});
    for (int i = 0; ws && i < info->ntmaps; i++)
      push_ref(p, NULL, sizeof(CUtensorMap));
    memcpy(sizes, p->size, sizeof(size_t) * (size_t)p->n);
    n = p->n;
  }
  free(p), free(args);
  return n;
}

/* Whether entry point FN takes the parameters the launch will pass it (ws: those of the
 * warp-specialized entry). Metadata that does not describe its PTX would have the driver read
 * past the parameters it is given. The count comes from the PTX text (entry_table), the sizes
 * from cuFuncGetParamInfo (drivers from 12.4; skipped on older ones), asked only of parameters
 * the PTX has: a query past the last is an error compute-sanitizer reports. */
static tilert_status check_params(const tilert_driver *d, const tilert_module *m, CUfunction fn, tilert_kernel *k,
                                  bool ws, const char *entry) {
  size_t want[MAX_PARAMS];
  int n = tilert__launch_params(&k->info, ws, want), declared = table_params(m->entries, entry);
  if (n < 0)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  if (declared >= 0 && declared != n)
    return tilert__err(TILERT_ERROR_BAD_METADATA, "entry point '%s' takes %d parameters; its metadata (kernel '%s') "
                       "passes %d: the metadata does not describe this PTX", entry, declared, k->info.name, n);
  for (int i = 0; d->FuncGetParamInfo && i < n; i++) {
    size_t offset, size;
    CUresult r = d->FuncGetParamInfo(fn, (size_t)i, &offset, &size);
    if (r != CUDA_SUCCESS)
      return tilert__drv_err("cuFuncGetParamInfo", r, entry);
    if (size != want[i])
      return tilert__err(TILERT_ERROR_BAD_METADATA, "entry point '%s': parameter %d is %zu bytes in the PTX, %zu "
                         "by its metadata (kernel '%s'): the metadata does not describe this PTX",
                         entry, i, size, want[i], k->info.name);
  }
  return tilert__ok();
}

/* Whether UNITS of work of one cost share out over WALKERS within 5% (and are more than them). */
static bool shares_out(int64_t units, int64_t walkers) {
  int64_t per = (units + walkers - 1) / walkers;
  return units > walkers && units * 20 >= per * walkers * 19;
}

/* The kernel's fourth grid parameter. Pairs of a row's folded order (its longest tile with its
 * shortest, ...: every pair costs the same, and the walkers at once run neighbouring pairs of
 * few rows, which share K and V in L2) where the rows have an even number of tiles and the pairs
 * share out; else whole rows where there are 3+ per walker, shared out (with fewer, longer rows
 * the blocks running at once work on different heads: the walk lost up to 11% to a block per
 * tile in run t4). Run u1 (docs/performance.md): pairs 7-20% faster than a block per tile at
 * N = 1k-4k (1-4% at 8k-16k), and 0-7% faster than whole rows at N = 512-1k. */
int64_t tilert__walk_chunk(int64_t gx, int64_t rows, int64_t walkers, int force) {
  int64_t c = 0;
  if (force >= 0)
    c = force < gx ? force : gx; /* a chunk past a row's end is a whole row */
  else if (walkers && gx % 2 == 0 && shares_out(rows * (gx / 2), walkers))
    c = 2;
  else if (walkers && rows >= 3 * walkers && shares_out(rows, walkers))
    c = gx;
  /* the kernel's 32-bit tile index runs to a chunk per walker past the last tile */
  return c && gx * rows + walkers * c > INT32_MAX ? 0 : c;
}

static tilert_status launch_gpu(tilert_kernel *k, const tilert_arg *args, const int64_t *dims,
                                const int64_t grid[3], tilert_stream *stream) {
  for (int ax = 0; ax < 3; ax++)
    if (grid[ax] > k->dev->max_grid[ax])
      return tilert__err(TILERT_ERROR_SHAPE, "grid axis %c is %lld; %s allows %d", "xyz"[ax],
                         (long long)grid[ax], k->dev->name, k->dev->max_grid[ax]);
  if (k->info.cluster > 1 && grid[0] % k->info.cluster)
    return tilert__err(TILERT_ERROR_SHAPE, "%s: grid x is %lld, not a multiple of its cluster of %d blocks",
                       k->info.name, (long long)grid[0], k->info.cluster);
  Params *p = malloc(sizeof *p);
  if (!p)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  marshal(&k->info, args, dims, p);
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(k->dev, &d);
  /* `= 0` outputs: zeroed by a launch before; on sm_90 a kernel that waits for it (zero_wait)
   * starts as its programmatic dependent, overlapping it (zero.c) */
  bool zeroed = false;
  if (!st.code && tilert__has_zero_init(&k->info))
    st = tilert__zero_outputs_gpu(d, k->dev, &k->info, args, stream ? stream->s : NULL, &zeroed);
  if (!st.code) {
    bool pdl = zeroed && k->info.zero_wait && k->dev->cc >= 90; /* a dependent of that launch only */
    CUfunction fn = k->fn;
    int threads = k->info.threads, smem = k->info.smem_bytes, cluster = k->info.cluster > 1 ? k->info.cluster : 1;
    int64_t launch[3] = {grid[0], grid[1], grid[2]}, total = grid[0] * grid[1] * grid[2];
    /* A persistent entry decodes tiles in 32-bit unsigned arithmetic. */
    bool fits = !k->info.ws_persistent || total <= INT32_MAX, locked = k->ws_fn && fits;
    if (locked) /* concurrent launches of one kernel share its cached tensor maps */
      pthread_mutex_lock(&k->tmaps->lock);
    if (locked && tilert__tmaps_bind(d, k, args)) {
      fn = k->ws_fn, threads = k->info.ws_threads, smem = k->info.ws_smem_bytes;
      if (k->info.ws_persistent) {
        cluster = k->info.ws_cluster;
        if (cluster == 2) { /* the kernel walks pairs: the grid halved along the pair's axis */
          int ax = k->info.ws_cluster_axis;
          total = total / grid[ax] * ((grid[ax] + 1) / 2);
        }
        /* The resident blocks walk every grid of more tiles than they are: the next tile's
         * loads run under this one's epilogue, where a fresh block would start them from its
         * prologue. A persistent entry's tiles all cost the same (uniform_trips), so the walk
         * needs no dynamic balance: at 15.5 waves it was up to 23% faster than a block per tile on
         * the H200 (attention, run t3; docs/performance.md). TILERT_PERSISTENT_WAVES = n walks
         * grids of at most n waves only (the A/B). A row walk's tiles cost what their x says: it
         * walks in chunks (tilert__walk_chunk), or a block per tile. */
        int64_t walkers = k->ws_blocks / cluster;
        int64_t chunk = k->info.ws_walk_rows ? tilert__walk_chunk(grid[0], grid[1] * grid[2], walkers, k->walk_chunk) : 1;
        bool walk = walkers && total > walkers && chunk && (!k->walk_waves || total <= (int64_t)k->walk_waves * walkers);
        push_walk(p, (int32_t[4]){(int32_t)grid[0], (int32_t)grid[1], (int32_t)grid[2],
                                  k->info.ws_walk_rows ? (int32_t)(walk ? chunk : 1) : k->tile_group});
        launch[0] = cluster * (walk ? walkers : total);
        launch[1] = launch[2] = 1;
      }
      push_tmaps(p, k);
    }
    CUresult r;
    if (cluster > 1 || pdl) {
      CUlaunchAttribute at[2];
      unsigned nat = 0;
      if (cluster > 1)
        at[nat++] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                        .value.clusterDim = {(unsigned)cluster, 1, 1}};
      if (pdl)
        at[nat++] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                        .value.programmaticStreamSerializationAllowed = 1};
      CUlaunchConfig cfg = {.gridDimX = (unsigned)launch[0], .gridDimY = (unsigned)launch[1],
                            .gridDimZ = (unsigned)launch[2], .blockDimX = (unsigned)threads,
                            .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = (unsigned)smem,
                            .hStream = stream ? stream->s : NULL, .attrs = at, .numAttrs = nat};
      r = d->LaunchKernelEx(&cfg, fn, p->ptr, NULL);
    } else {
      r = d->LaunchKernel(fn, (unsigned)launch[0], (unsigned)launch[1], (unsigned)launch[2], (unsigned)threads, 1, 1,
                          (unsigned)smem, stream ? stream->s : NULL, p->ptr, NULL);
    }
    if (locked)
      pthread_mutex_unlock(&k->tmaps->lock);
    if (r != CUDA_SUCCESS)
      st = tilert__drv_err(cluster > 1 || pdl ? "cuLaunchKernelEx" : "cuLaunchKernel", r, k->info.name);
  }
  free(p);
  return st;
}

static tilert_status launch_cpu(tilert_kernel *k, const tilert_arg *args, int nargs,
                                const int64_t *dims, const int64_t grid[3]) {
  tilert_cpu_launch l = {.info = &k->info, .args = args, .nargs = nargs, .dim_values = dims};
  memcpy(l.grid, grid, sizeof l.grid);
  char err[400] = "";
  if (k->cpu_fn(k->cpu_ctx, &l, err, sizeof err) != 0)
    return tilert__err(TILERT_ERROR_EXECUTION, "kernel '%s' failed on the CPU: %s", k->info.name,
                       err[0] ? err : "(no message)");
  return tilert__ok();
}

/* tilert_bind, its message prefixed with the kernel's name (the tail of a very long message may
 * be cut). */
tilert_status tilert__bind_kernel(const tilert_kernel *k, const tilert_arg *args, int nargs,
                                  int64_t *dims, int64_t grid[3]) {
  tilert_status st = tilert_bind(&k->info, args, nargs, dims, grid);
  if (st.code) {
    size_t pre = strlen(k->info.name) + 2, len = strlen(st.message);
    if (pre + len >= sizeof st.message)
      len = sizeof st.message - pre - 1;
    memmove(st.message + pre, st.message, len);
    memcpy(st.message, k->info.name, pre - 2);
    memcpy(st.message + pre - 2, ": ", 2);
    st.message[pre + len] = '\0';
  }
  return st;
}

tilert_status tilert__launch_bound(tilert_kernel *k, const tilert_arg *args, int nargs,
                                   const int64_t *dims, const int64_t grid[3],
                                   tilert_stream *stream) {
  if (stream && stream->dev != k->dev)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                       "tilert_launch: the stream belongs to another device");
  bool empty = !grid[0] || !grid[1] || !grid[2]; /* an empty problem (M = 0 rows) */
  /* `= 0` outputs: the GPU launch zeroes them itself (it may overlap the kernel); an empty launch
   * (no block has anything to do, but such an output of other dims still starts at 0) and the
   * CPU backend here */
  if ((empty || k->cpu_fn) && tilert__has_zero_init(&k->info)) {
    tilert_status st = k->cpu_fn ? tilert__zero_outputs_cpu(&k->info, args)
                                 : tilert__zero_outputs_only(k->dev, &k->info, args, stream);
    if (st.code)
      return st;
  }
  if (empty)
    return tilert__ok();
  if (k->cpu_fn)
    return launch_cpu(k, args, nargs, dims, grid);
  return launch_gpu(k, args, dims, grid, stream);
}

tilert_status tilert_launch(tilert_kernel *k, const tilert_arg *args, int nargs,
                            tilert_stream *stream) {
  if (!k)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_launch: kernel is NULL");
  int64_t dims[TILERT_MAX_DIMS], grid[3];
  tilert_status st = tilert__bind_entry(&k, args, nargs, dims, grid);
  if (st.code)
    return st;
  return tilert__launch_bound(k, args, nargs, dims, grid, stream);
}
