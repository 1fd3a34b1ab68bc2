/* api.c — the public compile API (tilec_api.h): the command line's pipeline (parse, sema,
 * driver_lower, nvptx_compile) as calls that return text instead of writing files, with the
 * diagnostics captured in memory. Linked only into libtilec.so (it calls the LLVM backend). */
#include "ast.h"
#include "build_id.h" /* generated: TILEC_BUILD_ID (Makefile) */
#include "tilec.h"
#include "tilec_api.h"

#include <stdlib.h>
#include <string.h>

struct tilec_result {
  Arena *a;
  bool ok;
  char *diag;         /* open_memstream's buffer (malloc) */
  size_t diag_len;
  const char *ptx;    /* arena */
  const char *meta;   /* arena */
  TirFunc *f;         /* kept for TILEC_TARGET_CPU */
};

const char *tilec_version(void) { return TILEC_VERSION; }
const char *tilec_build_id(void) { return TILEC_BUILD_ID; }

/* "NAME=VALUE" -> Define; NAME must be an identifier, as for -D on the command line. */
static bool api_define(Arena *a, const char *s, Define *out, Diag *d) {
  const char *eq = s ? strchr(s, '=') : NULL;
  bool ok = eq && eq > s;
  for (const char *p = s; ok && p < eq; p++)
    ok = *p == '_' || ((*p | 32) >= 'a' && (*p | 32) <= 'z') || (p > s && *p >= '0' && *p <= '9');
  if (!ok) {
    diag_plain(d, DIAG_ERROR, "a define must be NAME=VALUE with NAME an identifier, found '%s'",
               s ? s : "(null)");
    return false;
  }
  out->name = arena_strndup(a, s, (size_t)(eq - s));
  out->value = arena_strdup(a, eq + 1);
  return true;
}

/* The kernel the options name, or the only one; else an error naming the kernels present. */
static AstKernel *api_pick_kernel(Arena *a, AstProgram *prog, const char *name, const char *file,
                                  Diag *d) {
  const char *names = "";
  for (AstKernel *k = prog->kernels; k; k = k->next) {
    if (name ? !strcmp(k->name, name) : prog->nkernels == 1)
      return k;
    names = arena_printf(a, "%s%s%s", names, *names ? ", " : "", k->name);
  }
  if (name)
    diag_plain(d, DIAG_ERROR, "'%s' has no kernel '%s' (it has: %s)", file, name, names);
  else
    diag_plain(d, DIAG_ERROR, "'%s' holds %d kernels (%s): choose one with the kernel option",
               file, prog->nkernels, names);
  return NULL;
}

/* Runs the pipeline into r; diagnostics go to d. */
static bool api_run(tilec_result *r, const SourceFile *src, const tilec_options *o, Diag *d) {
  Arena *a = r->a;
  GpuArch arch = ARCH_SM90A;
  if (o->arch && !arch_from_name(o->arch, &arch)) {
    diag_plain(d, DIAG_ERROR, "unknown architecture '%s' (expected sm_80, sm_86, sm_89, sm_90 or "
               "sm_90a)", o->arch);
    return false;
  }
  if (o->opt_level < -1 || o->opt_level > 3) {
    diag_plain(d, DIAG_ERROR, "optimization level %d is not 0..3", o->opt_level);
    return false;
  }
  Define *defs = arena_alloc(a, sizeof *defs * (size_t)(o->ndefines > 0 ? o->ndefines : 1));
  for (int i = 0; i < o->ndefines; i++)
    if (!api_define(a, o->defines[i], &defs[i], d))
      return false;
  AstProgram *prog = parse_program(a, src, d);
  if (!prog || d->nerrors || !sema_check(a, prog, defs, o->ndefines, arch, d) || d->nerrors)
    return false;
  AstKernel *k = api_pick_kernel(a, prog, o->kernel, src->name, d);
  TirFunc *f = k ? driver_lower(a, k, d) : NULL;
  if (!f)
    return false;
  unsigned targets = o->targets ? o->targets : TILEC_TARGET_PTX | TILEC_TARGET_CPU;
  int smem = 0;
  if (targets & TILEC_TARGET_PTX) {
    NvptxOptions no = {.arch = arch, .opt_level = o->opt_level < 0 ? 3 : o->opt_level};
    /* the kernel and its full-size entry, if any, in one module; the kernel's smem from its block */
    TirFunc *fs[2] = {f, driver_full_entry(a, k, f, defs, o->ndefines, arch, d)};
    tilert_kernel_info *info = arena_alloc(a, sizeof *info);
    if (!(r->ptx = driver_compile(fs, fs[1] ? 2 : 1, &no, d)) ||
        tilert_parse_kernel_info_named(r->ptx, f->name, info).code)
      return false;
    smem = info->smem_bytes;
  }
  r->f = targets & TILEC_TARGET_CPU ? f : NULL;
  r->meta = meta_emit(a, f, smem);
  return d->nerrors == 0;
}

tilec_result *tilec_compile(const char *source, size_t len, const char *filename,
                            const tilec_options *o) {
  tilec_result *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->a = arena_new();
  FILE *mem = open_memstream(&r->diag, &r->diag_len);
  if (!mem) {
    arena_free(r->a), free(r);
    return NULL;
  }
  tilec_options defaults = {.opt_level = -1};
  SourceFile src = {.name = arena_strdup(r->a, filename ? filename : "<string>"),
                    .text = arena_strndup(r->a, source ? source : "", source ? len : 0),
                    .len = source ? len : 0};
  Diag d;
  diag_init(&d, &src, mem);
  d.werror = o && o->werror;
  r->ok = api_run(r, &src, o ? o : &defaults, &d);
  fclose(mem);
  if (!r->ok)
    r->ptx = r->meta = NULL, r->f = NULL;
  return r;
}

int tilec_result_ok(const tilec_result *r) { return r && r->ok; }
const char *tilec_result_diagnostics(const tilec_result *r) {
  return r && r->diag ? r->diag : "";
}
const char *tilec_result_ptx(const tilec_result *r) { return r ? r->ptx : NULL; }
const char *tilec_result_metadata(const tilec_result *r) { return r ? r->meta : NULL; }

tilert_status tilec_result_cpu_kernel(tilec_result *r, tilert_device *dev, tilert_kernel **out) {
  if (!r || !r->f) {
    tilert_status st = {.code = TILERT_ERROR_INVALID_ARGUMENT};
    snprintf(st.message, sizeof st.message, "tilec_result_cpu_kernel: %s",
             !r ? "NULL result" : !r->ok ? "the compile failed" : "compiled without TILEC_TARGET_CPU");
    return st;
  }
  return exec_cpu_kernel(dev, r->a, r->f, out);
}

void tilec_result_free(tilec_result *r) {
  if (!r)
    return;
  arena_free(r->a);
  free(r->diag);
  free(r);
}
