/* main.c — the tilec command line.
 *
 *   tilec FILE.tile [options]          compile (default --emit=ptx)
 *   tilec run FILE.tile [options]      run in the interpreter on random inputs
 *
 * The front end (parse + sema) runs here; --check and --emit=ast end here too. Everything else
 * goes to driver_backend() (driver.c). Exit status: 0 success, 1 for any error (bad usage,
 * unreadable input, compile errors). Outputs are written to a temporary file and renamed, so a
 * failed run never leaves a half-written output. */
#include "ast.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Inputs larger than this are refused before parsing (the language has no use for them). */
enum { MAX_INPUT_BYTES = 64 << 20 };

static const char usage_text[] =
    "usage: tilec FILE.tile [options]\n"
    "       tilec run FILE.tile [-D NAME=VALUE]... [--shape M=4,N=1000] [--seed N]\n"
    "                 [--in NAME=FILE.npy]... [--out DIR] [--kernel NAME] [--max-memory=BYTES]\n"
    "       tilec --link A.h B.h... -o NAME    one entry point over --emit=c specializations\n"
    "\n"
    "Compiles a .tile kernel file. With no --emit, writes PTX (FILE.ptx, or -o).\n"
    "\n"
    "options:\n"
    "  -o OUT              write the output to OUT ('-' = stdout)\n"
    "  -D NAME=VALUE       set a compile-time parameter, or pin a shape dimension (repeatable)\n"
    "  --kernel NAME       only the kernel NAME of a file of several\n"
    "  --arch=ARCH         target GPU: sm_80, sm_86, sm_89, sm_90, sm_90a (default sm_90a);\n"
    "                      repeatable with --emit=c (one PTX per arch)\n"
    "  --emit=KIND         ast | tir | schedule | llvm | ptx | c (default ptx); schedule: the\n"
    "                      GPU schedule for --arch (the TIR with its pipe waits and releases,\n"
    "                      warp roles, TMA boxes)\n"
    "  --dump=KIND         --emit=KIND to stdout (unless -o): tilec k.tile --dump=tir\n"
    "  -O0 -O1 -O2 -O3     optimization level (default -O3)\n"
    "  --check             check the program only: diagnostics, no output\n"
    "  --cubin             with --emit=c: also embed the ptxas-assembled cubin\n"
    "  -Werror             treat warnings as errors\n"
    "  --help              print this help and exit\n"
    "  --version           print the version and exit\n"
    "\n"
    "tilec run options (runs the kernel in the CPU interpreter on random or --in inputs, prints\n"
    "statistics of its outputs; --emit, -o and --cubin do not apply):\n"
    "  --shape NAME=V,...  sizes of the shape dimensions (e.g. M=4,N=1000), and values of the\n"
    "                      scalar arguments (e.g. eps=1e-5); a scalar not given is 1.0;\n"
    "                      repeatable, each NAME at most once\n"
    "  --seed N            random seed for the inputs (default 1)\n"
    "  --in NAME=FILE.npy  tensor NAME from a numpy file (its shape gives the dims; any\n"
    "                      numeric dtype, converted; repeatable); tensors not given are random,\n"
    "                      and the 'inputs:' line says which; on an out tensor, its start\n"
    "  --out DIR           write every out tensor to DIR/NAME.npy (bf16 as float32; DIR is\n"
    "                      made if missing)\n"
    "  --max-memory=BYTES  the most bytes all tensors may take together (default 1G; suffixes\n"
    "                      K, M, G, T: powers of 1024)\n"
    "\n"
    "exit status: 0 on success, 1 on any error.\n";

typedef struct Cli {
  TilecOptions o;
  bool werror;
  bool run_only_flags;     /* --shape/--seed/--max-memory seen (valid only with `run`) */
  const char *output_flags; /* the first of --emit / -o / --cubin seen (not for `run`) */
} Cli;

static int usage_error(Diag *d, const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  diag_plain(d, DIAG_ERROR, "%s (see tilec --help)", msg);
  return 1;
}

/* Value of an option given as `--opt=V` or `--opt V` (or `-oV` / `-o V` for short ones). */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  *missing = false;
  if (a[n] == '=')
    return a + n + 1;
  if (a[n] && name[1] != '-')
    return a + n; /* -oFILE, -DX=1 */
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static bool matches(const char *arg, const char *name) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n))
    return false;
  return arg[n] == 0 || arg[n] == '=' || name[1] != '-';
}

static int add_define(Cli *c, Arena *a, Diag *d, const char *v) {
  const char *eq = strchr(v, '=');
  if (!eq || eq == v)
    return usage_error(d, "-D needs NAME=VALUE, found '%s'", v);
  for (const char *p = v; p < eq; p++)
    if (!(p == v ? (*p == '_' || (*p | 32) >= 'a') && (*p | 32) <= 'z'
                 : *p == '_' || ((*p | 32) >= 'a' && (*p | 32) <= 'z') || (*p >= '0' && *p <= '9')))
      return usage_error(d, "-D needs NAME=VALUE with NAME an identifier, found '%s'", v);
  Define *defs = arena_alloc(a, (size_t)(c->o.ndefines + 1) * sizeof *defs);
  if (c->o.ndefines)
    memcpy(defs, c->o.defines, (size_t)c->o.ndefines * sizeof *defs);
  defs[c->o.ndefines].name = arena_strndup(a, v, (size_t)(eq - v));
  defs[c->o.ndefines].value = arena_strdup(a, eq + 1);
  c->o.defines = defs;
  c->o.ndefines++;
  return 0;
}

/* Appends one --shape value to the list (several --shape options add up) and refuses a NAME
 * given twice: `--shape M=4,M=5` is a typo, not a choice. The values themselves are checked
 * against the kernel later (driver.c). */
static int add_shapes(Cli *c, Arena *a, Diag *d, const char *v) {
  const char *all = c->o.shapes ? arena_printf(a, "%s,%s", c->o.shapes, v) : v;
  for (const char *p = all; *p;) {
    size_t len = strcspn(p, "=,");
    for (const char *q = all; len && q < p;) { /* an empty NAME is driver.c's to report */
      size_t qlen = strcspn(q, "=,");
      if (qlen == len && !strncmp(p, q, len)) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
        return usage_error(d, "--shape: '%s' is given more than once", name);
      }
      q += strcspn(q, ",");
      q += *q == ',';
    }
    p += strcspn(p, ",");
    p += *p == ',';
  }
  c->o.shapes = all;
  return 0;
}

/* "1048576", "512M", "2G": a byte count (suffixes K M G T are powers of 1024); false when it is
 * not one or does not fit in int64. */
static bool parse_bytes(const char *v, int64_t *out) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  const char *units = "KMGT", *u = *end ? strchr(units, *end) : NULL;
  if (!*v || !(*v >= '0' && *v <= '9') || errno || (*end && (!u || end[1])))
    return false;
  int shift = u ? 10 * (int)(u - units + 1) : 0;
  if (n > (INT64_MAX >> shift))
    return false;
  *out = (int64_t)n << shift;
  return true;
}

static int parse_args(Cli *c, Arena *a, Diag *d, int argc, char **argv, bool *exit_now) {
  TilecOptions *o = &c->o;
  o->emit = EMIT_PTX;
  o->opt_level = 3;
  o->seed = 1;
  o->run_max_bytes = TILEC_RUN_MAX_BYTES;
  bool emit_set = false, check = false, to_stdout = false; /* to_stdout: --dump */
  int i = 1;
  if (argc > 1 && !strcmp(argv[1], "run")) {
    o->run = true;
    i = 2;
  }
  for (; i < argc; i++) {
    const char *arg = argv[i];
    bool missing = false;
    const char *v;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      fputs(usage_text, stdout);
      *exit_now = true;
      return 0;
    } else if (!strcmp(arg, "--version")) {
      printf("tilec %s\n", TILEC_VERSION);
      *exit_now = true;
      return 0;
    } else if (!strcmp(arg, "--check")) {
      check = true;
    } else if (!strcmp(arg, "--cubin")) {
      o->cubin = true;
      c->output_flags = c->output_flags ? c->output_flags : "--cubin";
    } else if (!strcmp(arg, "-Werror")) {
      c->werror = true;
    } else if (arg[0] == '-' && arg[1] == 'O' && arg[2] >= '0' && arg[2] <= '3' && !arg[3]) {
      o->opt_level = arg[2] - '0';
    } else if (matches(arg, "-o")) {
      if (!(v = opt_value(argc, argv, &i, "-o", &missing)) || !*v)
        return usage_error(d, "'%s' needs a file name", "-o");
      o->output = v;
      c->output_flags = c->output_flags ? c->output_flags : "-o";
    } else if (matches(arg, "-D")) {
      if (!(v = opt_value(argc, argv, &i, "-D", &missing)))
        return usage_error(d, "'%s' needs NAME=VALUE", "-D");
      if (add_define(c, a, d, v))
        return 1;
    } else if (matches(arg, "--arch")) {
      if (!(v = opt_value(argc, argv, &i, "--arch", &missing)))
        return usage_error(d, "'%s' needs a value", "--arch");
      GpuArch ga;
      if (!arch_from_name(v, &ga))
        return usage_error(d, "unknown architecture '%s' (expected sm_80, sm_86, sm_89, sm_90 or "
                           "sm_90a)", v);
      bool dup = false;
      for (int j = 0; j < o->narchs; j++)
        dup |= o->archs[j] == ga;
      if (!dup)
        o->archs[o->narchs++] = ga;
    } else if (matches(arg, "--emit") || matches(arg, "--dump")) {
      /* --dump=KIND is --emit=KIND written to stdout (unless -o names a file) */
      const char *flag = matches(arg, "--dump") ? "--dump" : "--emit";
      if (!(v = opt_value(argc, argv, &i, flag, &missing)))
        return usage_error(d, "'%s' needs a value", flag);
      static const struct { const char *name; EmitKind k; } kinds[] = {
          {"ast", EMIT_AST}, {"tir", EMIT_TIR}, {"schedule", EMIT_SCHEDULE}, {"llvm", EMIT_LLVM},
          {"ptx", EMIT_PTX},  {"c", EMIT_C}};
      bool found = false;
      for (size_t j = 0; j < sizeof kinds / sizeof *kinds; j++)
        if (!strcmp(v, kinds[j].name)) {
          o->emit = kinds[j].k;
          found = true;
        }
      if (!found)
        return usage_error(d, "unknown kind '%s' (expected ast, tir, schedule, llvm, ptx or c)", v);
      if (emit_set && to_stdout != (flag[2] == 'd'))
        return usage_error(d, "%s", "--emit and --dump cannot be used together");
      emit_set = true;
      to_stdout = flag[2] == 'd';
      c->output_flags = c->output_flags ? c->output_flags : flag;
    } else if (matches(arg, "--shape")) {
      if (!(v = opt_value(argc, argv, &i, "--shape", &missing)))
        return usage_error(d, "'%s' needs a value such as M=4,N=1000", "--shape");
      if (add_shapes(c, a, d, v))
        return 1;
      c->run_only_flags = true;
    } else if (matches(arg, "--in")) {
      if (!(v = opt_value(argc, argv, &i, "--in", &missing)) || !strchr(v, '=') || *v == '=')
        return usage_error(d, "'%s' needs NAME=FILE.npy", "--in");
      const char **ins = arena_alloc(a, sizeof *ins * (size_t)(o->ninputs + 1));
      if (o->ninputs)
        memcpy(ins, o->inputs, sizeof *ins * (size_t)o->ninputs);
      ins[o->ninputs++] = v;
      o->inputs = ins;
      c->run_only_flags = true;
    } else if (matches(arg, "--out")) {
      if (!(v = opt_value(argc, argv, &i, "--out", &missing)) || !*v)
        return usage_error(d, "'%s' needs a directory", "--out");
      o->out_dir = v;
      c->run_only_flags = true;
    } else if (matches(arg, "--kernel")) {
      if (!(v = opt_value(argc, argv, &i, "--kernel", &missing)) || !*v)
        return usage_error(d, "'%s' needs a kernel name", "--kernel");
      o->kernel = v;
    } else if (matches(arg, "--seed")) {
      if (!(v = opt_value(argc, argv, &i, "--seed", &missing)))
        return usage_error(d, "'%s' needs a number", "--seed");
      char *end;
      errno = 0;
      unsigned long s = strtoul(v, &end, 10);
      if (!*v || *end || errno || s > 0xffffffffUL)
        return usage_error(d, "invalid seed '%s' (expected a non-negative integer)", v);
      o->seed = (unsigned)s;
      c->run_only_flags = true;
    } else if (matches(arg, "--max-memory")) {
      if (!(v = opt_value(argc, argv, &i, "--max-memory", &missing)))
        return usage_error(d, "'%s' needs a byte count such as 4G", "--max-memory");
      if (!parse_bytes(v, &o->run_max_bytes))
        return usage_error(d, "invalid --max-memory '%s' (expected bytes, e.g. 4096, 512M or 4G)", v);
      c->run_only_flags = true;
    } else if (arg[0] == '-' && arg[1]) {
      return usage_error(d, "unknown option '%s'", arg);
    } else {
      if (o->input)
        return usage_error(d, "more than one input file ('%s')", arg);
      o->input = arg;
    }
  }
  if (!o->input)
    return usage_error(d, "%s", o->run ? "no input file (tilec run FILE.tile)" : "no input file");
  if (check && emit_set)
    return usage_error(d, "%s", "--check and --emit cannot be used together");
  if (check)
    o->emit = EMIT_CHECK;
  if (o->run && c->output_flags)
    return usage_error(d, "'tilec run' writes no output file, so '%s' does not apply (it runs the "
                       "kernel in the interpreter; compile without 'run' to get PTX)",
                       c->output_flags);
  if (c->run_only_flags && !o->run)
    return usage_error(d, "%s", "--shape, --seed, --in, --out and --max-memory are only for 'tilec run'");
  if (o->narchs > 1 && o->emit != EMIT_C && o->emit != EMIT_CHECK)
    return usage_error(d, "%s", "several --arch values need --emit=c");
  if (o->cubin && o->emit != EMIT_C)
    return usage_error(d, "%s", "--cubin needs --emit=c");
  if (o->narchs == 0)
    o->archs[o->narchs++] = ARCH_SM90A;
  if (to_stdout && !o->output)
    o->output = "-";
  return 0;
}

/* Reads the whole input into the arena, NUL-terminated. */
static bool read_source(Arena *a, Diag *d, const char *path, SourceFile *src) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    diag_plain(d, DIAG_ERROR, "cannot open '%s': %s", path, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    diag_plain(d, DIAG_ERROR, "cannot read '%s': it is a directory", path);
    fclose(f);
    return false;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      diag_plain(d, DIAG_ERROR, "out of memory reading '%s'", path);
      fclose(f);
      return false;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (len > MAX_INPUT_BYTES) {
      diag_plain(d, DIAG_ERROR, "'%s' is larger than %d MB", path, MAX_INPUT_BYTES >> 20);
      free(buf);
      fclose(f);
      return false;
    }
    if (n == 0)
      break;
    if (len == cap) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb)
        free(buf);
      buf = nb;
    }
  }
  bool err = ferror(f);
  fclose(f);
  if (err) {
    diag_plain(d, DIAG_ERROR, "cannot read '%s': %s", path, strerror(errno));
    free(buf);
    return false;
  }
  src->name = path;
  src->text = arena_strndup(a, buf, len);
  src->len = len;
  free(buf);
  return true;
}

/* Writes the AST dump to stdout or, whole or not at all, to `out`. */
static int emit_ast(Arena *a, Diag *d, const AstProgram *prog, const char *out) {
  OutFile f;
  if (!out_open(a, &f, out, d))
    return 1;
  ast_print(f.fp, prog);
  return out_commit(&f, 1, true, d) ? 0 : 1;
}

/* tilec --link A.h B.h ... -o NAME (docs/aot.md): the headers come from --emit=c runs. */
static int link_main(Arena *a, Diag *d, int argc, char **argv) {
  const char **headers = arena_alloc(a, sizeof *headers * (size_t)argc);
  const char *out = NULL;
  int n = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-o")) {
      if (i + 1 >= argc)
        return usage_error(d, "'%s' needs a value", "-o");
      out = argv[++i];
    } else if (argv[i][0] == '-') {
      return usage_error(d, "unknown option '%s' for --link", argv[i]);
    } else {
      headers[n++] = argv[i];
    }
  }
  if (n == 0)
    return usage_error(d, "%s", "--link needs the headers written by --emit=c");
  if (!out || !strcmp(out, "-"))
    return usage_error(d, "%s", "--link needs -o NAME (it writes NAME.h and NAME.c)");
  return emit_c_link(a, out, headers, n, d) ? 0 : 1;
}

int main(int argc, char **argv) {
  Arena *a = arena_new();
  Diag d;
  diag_init(&d, NULL, stderr);
  const char *nc = getenv("NO_COLOR");
  const char *term = getenv("TERM");
  d.color = isatty(fileno(stderr)) && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
  Cli c = {0};
  bool exit_now = false;
  if (argc < 2) {
    fputs(usage_text, stderr);
    arena_free(a);
    return 1;
  }
  if (!strcmp(argv[1], "--link")) {
    int lrc = link_main(a, &d, argc, argv);
    arena_free(a);
    return lrc;
  }
  int rc = parse_args(&c, a, &d, argc, argv, &exit_now);
  if (rc || exit_now) {
    arena_free(a);
    return rc;
  }
  d.werror = c.werror;
  SourceFile src = {0};
  if (!read_source(a, &d, c.o.input, &src)) {
    arena_free(a);
    return 1;
  }
  d.file = &src;
  AstProgram *prog = parse_program(a, &src, &d);
  if (prog && !sema_check(a, prog, c.o.defines, c.o.ndefines, driver_sema_arch(&c.o), &d))
    prog = NULL;
  if (!prog || d.nerrors > 0) {
    arena_free(a);
    return 1;
  }
  if (c.o.emit == EMIT_CHECK)
    rc = 0;
  else if (c.o.emit == EMIT_AST)
    rc = emit_ast(a, &d, prog, c.o.output);
  else
    rc = driver_backend(a, prog, &c.o, &d);
  arena_free(a);
  return rc;
}
