/* meta.c — the kernel metadata that travels inside the PTX as "// tilec: " comment lines.
 * The format is specified in docs/architecture.md ("Kernel metadata") and parsed by
 * runtime/meta.c; keep the two in step. */
#include "tilec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tokens are written as they are, but a line break inside one would end the line early. */
static void put_text(FILE *m, const char *s) {
  for (; s && *s; s++)
    fputc(*s == '\n' || *s == '\r' ? ' ' : *s, m);
}

static void put_param(FILE *m, const TirParamValue *p) {
  fprintf(m, "// tilec: param %s = ", p->name);
  if (!p->is_float)
    fprintf(m, "%lld\n", (long long)p->value);
  else if (isinf(p->value))
    fprintf(m, "%sinf\n", p->value < 0 ? "-" : "");
  else
    fprintf(m, "%.17g\n", p->value);
}

char *meta_emit(Arena *a, const TirFunc *f, int dynamic_smem_bytes) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m)
    return arena_strdup(a, "");
  fprintf(m, "// tilec: kernel %s\n", f->name);
  fprintf(m, "// tilec: threads %d\n", f->threads);
  if (f->cluster > 1)
    fprintf(m, "// tilec: cluster %d\n", f->cluster);
  fprintf(m, "// tilec: smem %d\n", dynamic_smem_bytes);
  for (int i = 0; i < f->ndims; i++) {
    if (f->dims[i].pinned)
      fprintf(m, "// tilec: dim %s = %lld\n", f->dims[i].name, (long long)f->dims[i].value);
    else
      fprintf(m, "// tilec: dim %s\n", f->dims[i].name);
  }
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *arg = &f->args[i];
    if (arg->kind == ARG_SCALAR) {
      fprintf(m, "// tilec: arg %s scalar %s\n", arg->name, elem_name(arg->elem));
      continue;
    }
    fprintf(m, "// tilec: arg %s tensor %s %s", arg->name, elem_name(arg->elem),
            arg->zero_init ? "out=0" : arg->is_out ? "out" : "in");
    for (int d = 0; d < arg->rank; d++)
      fprintf(m, " %s", f->dims[arg->dims[d]].name);
    fputc('\n', m);
  }
  fputs("// tilec: grid ", m);
  for (int i = 0; i < 3; i++) {
    if (i)
      fputs(" | ", m);
    put_text(m, f->grid[i].rpn && *f->grid[i].rpn ? f->grid[i].rpn : "1");
  }
  fputc('\n', m);
  for (int i = 0; i < f->nrequires; i++) {
    fputs("// tilec: require ", m);
    put_text(m, f->requires[i].rpn);
    fputs(" | ", m);
    put_text(m, f->requires[i].text ? f->requires[i].text : f->requires[i].rpn);
    fputc('\n', m);
  }
  for (int i = 0; i < f->nparams; i++)
    put_param(m, &f->params[i]);
  if (f->full_entry)
    fprintf(m, "// tilec: full %s\n", f->full_entry);
  if (tir_aligned_args(f))
    fputs("// tilec: aligned 16\n", m);
  fclose(m);
  char *s = arena_strdup(a, buf ? buf : "");
  free(buf);
  return s;
}

char *meta_emit_ws(Arena *a, const TirFunc *f, const char *entry, int dynamic_smem_bytes) {
  const TirSchedule *s = f->sched;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m)
    return arena_strdup(a, "");
  fprintf(m, "// tilec: ws %s threads %d smem %d", entry, s->consumer_threads * s->groups + s->producer_threads,
          dynamic_smem_bytes);
  if (s->persistent)
    fprintf(m, " persistent group %d%s%s", s->tile_group, s->walk_rows ? " rows" : "", s->groups == 2 ? " pingpong" : "");
  if (s->cluster == 2)
    fprintf(m, " cluster 2 %c", "xyz"[s->cluster_axis]);
  fputc('\n', m);
  for (int t = 0; t < s->ntmaps; t++) {
    const TirTmap *tm = &s->tmaps[t];
    fprintf(m, "// tilec: tmap %s swizzle %d box", f->args[tm->arg].name, tm->swizzle);
    for (int d = 0; d < f->args[tm->arg].rank; d++)
      fprintf(m, " %d", tm->box[d]);
    fputs(tm->multicast ? " multicast\n" : "\n", m);
  }
  fclose(m);
  char *out = arena_strdup(a, buf ? buf : "");
  free(buf);
  return out;
}
