/* common.c — the arena, element types and f16/bf16 rounding shared by every stage. */
#include "tilec.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- arena */

/* Chunks of at least ARENA_CHUNK bytes, bump-allocated, all freed by arena_free. */
enum { ARENA_CHUNK = 64 * 1024 };

typedef struct ArenaChunk {
  struct ArenaChunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} ArenaChunk;

struct Arena {
  ArenaChunk *head;
};

/* Running out of memory ends the compilation like any other error: exit status 1 (main.c). */
static _Noreturn void arena_out_of_memory(void) {
  fputs("tilec: error: out of memory\n", stderr);
  exit(1);
}

Arena *arena_new(void) {
  Arena *a = calloc(1, sizeof *a);
  if (!a)
    arena_out_of_memory();
  return a;
}

void arena_free(Arena *a) {
  if (!a)
    return;
  for (ArenaChunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t n) {
  if (n > SIZE_MAX / 2) /* the rounding and the chunk header below must not wrap around */
    arena_out_of_memory();
  n = (n + 15) & ~(size_t)15;
  ArenaChunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    c = malloc(sizeof *c + cap);
    if (!c)
      arena_out_of_memory();
    c->used = 0;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

/* ---------------------------------------------------------- element types */

static const struct {
  const char *name;
  int bytes;
  bool is_float;
} elem_table[TY_COUNT] = {
#define X(e, name, bytes, isf) [e] = {name, bytes, isf},
    TILEC_ELEM_TYPES(X)
#undef X
};

const char *elem_name(ElemType t) { return (unsigned)t < TY_COUNT ? elem_table[t].name : "?"; }
int elem_bytes(ElemType t) { return elem_table[t].bytes; }
bool elem_is_float(ElemType t) { return elem_table[t].is_float; }

bool elem_from_name(const char *s, ElemType *out) {
  for (int i = 0; i < TY_COUNT; i++)
    if (!strcmp(s, elem_table[i].name)) {
      *out = (ElemType)i;
      return true;
    }
  return false;
}

/* ------------------------------------------------------- f16/bf16 rounding */

uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16_bits(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx > 0x7f800000) /* NaN: keep it quiet and non-zero */
    return sign | 0x7e00;
  if (absx >= 0x477ff000) /* rounds to >= 65520: inf */
    return sign | 0x7c00;
  if (absx < 0x38800000) { /* below the smallest normal f16 (2^-14): subnormal or zero */
    /* value = absx as float; f16 subnormal unit is 2^-24. Scale and round to nearest even. */
    float a = bits_f32(absx);
    float scaled = a * 16777216.0f; /* 2^24, exact */
    float r = rintf(scaled);        /* default rounding mode: nearest even */
    return sign | (uint16_t)r;
  }
  uint32_t mant = absx & 0x7fffff;
  int32_t exp = (int32_t)(absx >> 23) - 127 + 15;
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    h++; /* carry into the exponent is the correct result */
  return sign | (uint16_t)h;
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f)
    return bits_f32(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000)
    return (uint16_t)((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return (uint16_t)(x >> 16);
}

float bf16_bits_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

double round_to_elem(ElemType t, double v) {
  switch (t) {
  case TY_F16:
    return f16_bits_to_f32(f32_to_f16_bits((float)v));
  case TY_BF16:
    return bf16_bits_to_f32(f32_to_bf16_bits((float)v));
  case TY_F32:
    return (float)v;
  case TY_I32:
    return (double)(int32_t)v;
  case TY_BOOL:
    return v != 0;
  default:
    return v;
  }
}

double elem_load(const void *base, int64_t i, ElemType t) {
  switch (t) {
  case TY_F32: return ((const float *)base)[i];
  case TY_F16: return f16_bits_to_f32(((const uint16_t *)base)[i]);
  case TY_BF16: return bf16_bits_to_f32(((const uint16_t *)base)[i]);
  case TY_I32: return ((const int32_t *)base)[i];
  default: return ((const uint8_t *)base)[i] != 0;
  }
}

void elem_store(void *base, int64_t i, ElemType t, double v) {
  switch (t) {
  case TY_F32: ((float *)base)[i] = (float)v; break;
  case TY_F16: ((uint16_t *)base)[i] = f32_to_f16_bits((float)v); break;
  case TY_BF16: ((uint16_t *)base)[i] = f32_to_bf16_bits((float)v); break;
  case TY_I32: ((int32_t *)base)[i] = (int32_t)v; break;
  default: ((uint8_t *)base)[i] = v != 0; break;
  }
}

/* ------------------------------------------------------------- GPU arches */

static const struct {
  const char *name;
  int smem;              /* bytes of shared memory a block may have */
  int threads, blocks;   /* resident per SM at most */
} arch_table[ARCH_COUNT] = {
    [ARCH_SM80] = {"sm_80", 163 * 1024, 2048, 32}, [ARCH_SM86] = {"sm_86", 99 * 1024, 1536, 16},
    [ARCH_SM89] = {"sm_89", 99 * 1024, 1536, 24},  [ARCH_SM90] = {"sm_90", 227 * 1024, 2048, 32},
    [ARCH_SM90A] = {"sm_90a", 227 * 1024, 2048, 32},
};

const char *arch_name(GpuArch a) { return arch_table[a].name; }
int arch_smem_limit(GpuArch a) { return arch_table[a].smem; }
int arch_sm_threads(GpuArch a) { return arch_table[a].threads; }
int arch_sm_blocks(GpuArch a) { return arch_table[a].blocks; }

/* The driver reserves 1 KB of shared memory a block. */
int arch_blocks_per_sm(GpuArch a, int threads, int smem) {
  int by_smem = (arch_smem_limit(a) + 1024) / (smem + 1024), by_threads = arch_sm_threads(a) / threads;
  by_smem = by_smem < by_threads ? by_smem : by_threads;
  return by_smem < arch_sm_blocks(a) ? by_smem : arch_sm_blocks(a);
}

bool arch_from_name(const char *s, GpuArch *out) {
  for (int i = 0; i < ARCH_COUNT; i++)
    if (!strcmp(s, arch_table[i].name)) {
      *out = (GpuArch)i;
      return true;
    }
  return false;
}

/* ------------------------------------------------------------- ptxas */

const char *ptxas_find(Arena *a) {
  const char *env = getenv("TILEC_PTXAS");
  if (env && *env)
    return env;
  const char *path = getenv("PATH");
  char *copy = arena_strdup(a, path ? path : "");
  for (char *dir = strtok(copy, ":"); dir; dir = strtok(NULL, ":")) {
    char *cand = arena_printf(a, "%s/ptxas", dir);
    if (access(cand, X_OK) == 0)
      return cand;
  }
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : NULL;
}

long ptxas_spill_line(const char *line) {
  long frame, st, ld;
  if (sscanf(line, " %ld bytes stack frame, %ld bytes spill stores, %ld bytes spill loads", &frame, &st, &ld) != 3)
    return -1;
  return st + ld;
}

/* `ptxas -v`'s reports of the last modules assembled in this process, by the text they came from:
 * compiling one module asks several questions of the same text (drop_spilling_hint's spills,
 * compile_ws's spills of the warp-specialized entries, a refusal), and ptxas is most of a big
 * module's compile time. Entries are malloc'd (they outlive any one arena) and replaced
 * round-robin; a lock, since libtilec may compile on several threads. */
enum { PTXAS_CACHED = 4 };
typedef struct {
  char *ptxas, *ptx, *report; /* NULL: an empty slot */
  size_t len;
  GpuArch arch;
  int status; /* pclose's: 0 when ptxas assembled it */
} PtxasReport;
static PtxasReport ptxas_reports[PTXAS_CACHED];
static int ptxas_next_slot;
static pthread_mutex_t ptxas_lock = PTHREAD_MUTEX_INITIALIZER;

/* Runs `ptxas -v` on ptx: its output (stdout and stderr) into *report, malloc'd; pclose's status,
 * or -1 when it could not run. */
static int ptxas_run(const char *ptxas, const char *ptx, GpuArch arch, char **report) {
  *report = NULL;
  const char *tmpdir = getenv("TMPDIR");
  char path[4096], cmd[8192];
  snprintf(path, sizeof path, "%s/tilec-ptxas-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  int fd = mkstemp(path);
  FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!fp) {
    if (fd >= 0)
      close(fd), unlink(path);
    return -1;
  }
  bool wrote = fputs(ptx, fp) >= 0;
  wrote &= fclose(fp) == 0;
  /* the paths are ours or the user's own TILEC_PTXAS; quoted for the shell */
  int n = snprintf(cmd, sizeof cmd, "'%s' -arch=%s -v '%s' -o /dev/null 2>&1", ptxas, arch_name(arch), path);
  FILE *p = wrote && n > 0 && (size_t)n < sizeof cmd ? popen(cmd, "r") : NULL;
  size_t len = 0, cap = 4096;
  char *out = p ? malloc(cap) : NULL;
  size_t got;
  while (out && (got = fread(out + len, 1, cap - 1 - len, p)) > 0)
    if ((len += got) == cap - 1) {
      char *grown = realloc(out, cap *= 2);
      if (!grown)
        free(out);
      out = grown;
    }
  int status = p ? pclose(p) : -1;
  unlink(path);
  if (!out)
    return -1;
  out[len] = '\0';
  *report = out;
  return status;
}

/* Asked again of the same text, ptxas and arch, the report comes from ptxas_reports. */
const char *ptxas_report(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, int *status_out) {
  size_t len = strlen(ptx);
  pthread_mutex_lock(&ptxas_lock);
  PtxasReport *hit = NULL;
  for (int k = 0; k < PTXAS_CACHED && !hit; k++) {
    PtxasReport *r = &ptxas_reports[k];
    if (r->ptx && r->len == len && r->arch == arch && !strcmp(r->ptxas, ptxas) && !memcmp(r->ptx, ptx, len))
      hit = r;
  }
  *status_out = hit ? hit->status : -1;
  const char *report = hit ? arena_strdup(a, hit->report) : NULL;
  pthread_mutex_unlock(&ptxas_lock);
  if (hit)
    return report;
  char *out;
  int status = ptxas_run(ptxas, ptx, arch, &out);
  *status_out = out ? status : -1;
  if (!out)
    return NULL;
  report = arena_strdup(a, out);
  if (status != -1 && WIFSIGNALED(status)) { /* killed (out of memory, ^C): asked again, ptxas runs again */
    free(out);
    return report;
  }
  char *ptx_copy = malloc(len + 1), *ptxas_copy = strdup(ptxas);
  pthread_mutex_lock(&ptxas_lock);
  PtxasReport *r = &ptxas_reports[ptxas_next_slot];
  if (ptx_copy && ptxas_copy) {
    ptxas_next_slot = (ptxas_next_slot + 1) % PTXAS_CACHED;
    free(r->ptxas), free(r->ptx), free(r->report);
    memcpy(ptx_copy, ptx, len + 1);
    *r = (PtxasReport){.ptxas = ptxas_copy, .ptx = ptx_copy, .report = out, .len = len, .arch = arch, .status = status};
  } else {
    free(ptx_copy), free(ptxas_copy), free(out);
  }
  pthread_mutex_unlock(&ptxas_lock);
  return report;
}

/* The next line of report at *at into line (cut at its size); false at the end. */
static bool report_line(const char **at, char *line, size_t size) {
  if (!**at)
    return false;
  size_t n = strcspn(*at, "\n");
  size_t keep = n < size - 1 ? n : size - 1;
  memcpy(line, *at, keep);
  line[keep] = '\0';
  *at += n + ((*at)[n] == '\n');
  return true;
}

long ptxas_spill_bytes(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, const char *suffix) {
  int status;
  const char *at = ptxas_report(a, ptxas, ptx, arch, &status);
  long spill = 0;
  char line[512];
  bool counted = !suffix; /* the function the next properties line is about ends with suffix */
  while (at && report_line(&at, line, sizeof line)) {
    const char *fn = strstr(line, "Function properties for ");
    if (fn && suffix) {
      fn += strlen("Function properties for ");
      size_t n = strcspn(fn, "\r\n"), k = strlen(suffix);
      counted = n >= k && !strncmp(fn + n - k, suffix, k);
    }
    long bytes = counted ? ptxas_spill_line(line) : -1;
    if (bytes >= 0)
      spill += bytes;
  }
  return status == 0 ? spill : -1;
}

char *ptxas_refusal(Arena *a, const char *ptxas, const char *ptx, GpuArch arch) {
  int status;
  const char *at = ptxas_report(a, ptxas, ptx, arch, &status);
  char line[512], *why = NULL;
  while (at && report_line(&at, line, sizeof line))
    if (!why && (strstr(line, "fatal") || strstr(line, "error")))
      why = arena_strndup(a, line, strcspn(line, "\r\n"));
  return at && status != 0 ? (why ? why : arena_strdup(a, "ptxas failed")) : NULL;
}

int ptxas_registers(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, int *regs, int max) {
  int status;
  const char *at = ptxas_report(a, ptxas, ptx, arch, &status);
  int n = 0, r;
  char line[512];
  while (at && report_line(&at, line, sizeof line)) {
    const char *u = strstr(line, "Used ");
    if (u && sscanf(u, "Used %d registers", &r) == 1 && n < max)
      regs[n++] = r;
  }
  return status == 0 && n > 0 ? n : -1; /* none: not the report we know */
}

bool env_off(const char *name) {
  const char *e = getenv(name);
  return e && !strcmp(e, "0");
}

bool env_on(const char *name) {
  const char *e = getenv(name);
  return e && !strcmp(e, "1");
}

bool tir_aligned_args(const TirFunc *f) { return f->aligned_args || env_on("TILEC_ALIGNED_ARGS"); }
