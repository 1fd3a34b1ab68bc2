# bench/bench.mk — included by the top-level Makefile.
#
#   make bench-prep   HERE (needs nvcc, and LLVM for build/tilec): builds build/bench/libbaselines.so
#                     (hand-written CUDA baselines), build/libtilert.so, and the PTX of the bench set
#                     (bench/bench_set.txt; BENCH_ALL=1: every variant of bench/configs.txt;
#                     BENCH_WITH=REGEX: the set and the variants whose name matches) into
#                     build/bench/ptx/ (a variant tilec cannot compile is
#                     recorded in NAME.err and becomes a "no PTX" row, it does not stop the build)
#   make bench        ON THE GPU MACHINE, from a carried build/: runs bench/run_gpu.sh; builds nothing
#   make tuned        the launch shapes the H200 picked (bench/tuned.txt, made by bench/tuned.py from
#                     bench/results/latest.json) as AOT C in build/tuned/: one specialization per line
#                     and, per row op, one entry point that picks the first that fits (docs/aot.md)
#
# The GPU machine has no LLVM, flex or bison: everything of ours it needs is built here.
#
# Element types: a variant's PARAM=VALUE list becomes -D flags, so `T=bf16` compiles the example's
# type parameter (`T: type = f16`) for bf16; bench/run.py gives that variant only the bf16 cases
# (variant_dtype: T, else the example's default) and `make bench-dry-run` warns about a PTX whose
# tensors are not of its variant's dtype.

NVCC ?= $(CUDA)/bin/nvcc
BENCH_B := $(B)/bench
# sm_90a machine code only (runs on the H200's sm_90); -gencode form as HOPPER.md advises.
BENCH_NVCCFLAGS ?= -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
                   -Xcompiler -Wall -Ibench/baselines
BENCH_CU := $(sort $(wildcard bench/baselines/*.cu))
BENCH_CU_OBJ := $(BENCH_CU:bench/baselines/%.cu=$(BENCH_B)/baselines/%.o)
# Every variant's name (read only where used: a recursive variable)
BENCH_ALL_NAMES = $(shell awk '!/^[[:space:]]*(\#|$$)/ {print $$1}' bench/configs.txt 2>/dev/null)
# The bench set (bench/bench_set.txt: what a plain `make bench` times); BENCH_ALL=1: every variant.
ifeq ($(BENCH_ALL),1)
BENCH_VARIANTS := $(BENCH_ALL_NAMES)
else
BENCH_VARIANTS := $(shell sed 's/\#.*//' bench/bench_set.txt 2>/dev/null)
endif
# BENCH_WITH=REGEX: also the variants whose name matches (the A/Bs of `run.py --with REGEX`)
ifneq ($(BENCH_WITH),)
BENCH_VARIANTS += $(shell printf '%s\n' $(BENCH_ALL_NAMES) | grep -E '$(value BENCH_WITH)')
endif
BENCH_PTX := $(BENCH_VARIANTS:%=$(BENCH_B)/ptx/%.ptx)

.PHONY: bench-prep bench-ptx bench-baselines bench-dry-run tuned FORCE

$(BENCH_B)/baselines/%.o: bench/baselines/%.cu bench/baselines/common.cuh bench/baselines/baselines.h
	@mkdir -p $(@D)
	$(NVCC) $(BENCH_NVCCFLAGS) -c $< -o $@

# cudart is linked statically (nvcc's default): the library needs only the driver at run time.
$(BENCH_B)/libbaselines.so: $(BENCH_CU_OBJ)
	$(NVCC) -shared -gencode=arch=compute_90a,code=sm_90a -o $@ $^

bench-baselines: $(BENCH_B)/libbaselines.so

# One rule per variant; depends on tilec only when it exists, so a missing compiler gives NAME.err
# files (and "no PTX" rows) instead of a failed build.
$(BENCH_B)/ptx/%.ptx: bench/configs.txt bench/gen_ptx.sh $(wildcard $(B)/tilec) $(wildcard dsl/examples/*.tile)
	@bash bench/gen_ptx.sh $(B)/tilec $* $(@D)

# PTX older than build/tilec came from another compiler (a variant outside the set, made by hand
# with gen_ptx.sh before the compiler changed): removed, so that a run of it says "no PTX"
# instead of timing the old code.
bench-ptx: $(BENCH_PTX)
	@[ ! -x $(B)/tilec ] || for p in $(BENCH_B)/ptx/*.ptx; do [ -e "$$p" ] && [ "$$p" -ot $(B)/tilec ] && \
	  { echo "bench-prep: removed $$p (older than $(B)/tilec)"; rm -f "$$p" "$${p%.ptx}.ptxas" "$${p%.ptx}.err"; }; done; true
	@n=0; ok=0; for v in $(BENCH_VARIANTS); do n=$$((n+1)); \
	  [ -s $(BENCH_B)/ptx/$$v.ptx ] && ok=$$((ok+1)); done; \
	echo "bench-prep: $$ok of $$n PTX variants in $(BENCH_B)/ptx"; \
	for v in $(BENCH_VARIANTS); do [ -s $(BENCH_B)/ptx/$$v.ptx ] || echo "  missing: $$v ($$(head -1 $(BENCH_B)/ptx/$$v.err 2>/dev/null))"; done; \
	for v in $(BENCH_VARIANTS); do p=$(BENCH_B)/ptx/$$v; \
	  { awk '/Function properties for/ {f = $$NF} /bytes spill stores/ && $$5 + 0 > 0 {print f, "spills", $$5, "bytes"}' $$p.ptxas 2>/dev/null; \
	    sed -n "s/.*C751[45].*in the function '\([^']*\)'.*/\1 ptxas serialized its wgmmas (C7514\/C7515)/p" $$p.ptxas 2>/dev/null | sort -u; } | \
	  while read f what; do \
	    if [ "$${f%__ws}" = "$$f" ] && grep -q "entry $${f}__ws(" $$p.ptx; then \
	      echo "  note: $$v: $$f: $$what in the cp.async fallback entry (the bench launches $${f}__ws)"; \
	    else case $$what in spills*) why=" (a launch shape this kernel does not fit; drop it from bench/configs.txt)";; *) why="";; esac; \
	      echo "  WARNING: $$v: $$f: $$what$$why"; fi; \
	  done; done; true

# The commit the run measures (the GPU machine gets a copy of the tree without .git).
$(BENCH_B)/commit.txt: FORCE
	@mkdir -p $(@D)
	@c=$$(git rev-parse HEAD 2>/dev/null || echo unknown); \
	 [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && c="$$c-dirty"; \
	 echo "$$c" > $@; echo "bench-prep: commit $$c"

bench-prep: $(BENCH_B)/libbaselines.so $(BENCH_B)/commit.txt
	@$(MAKE) --no-print-directory $(B)/tilec $(B)/libtilert.so || \
	  echo "bench-prep: WARNING: build/tilec or build/libtilert.so did not build; tilec rows will say why"
	@$(MAKE) --no-print-directory bench-ptx
	@du -sh $(B) | awk '{print "bench-prep: build/ is " $$1 " (carried to the GPU machine; limit 64 MiB)"}'

bench:
	@bash bench/run_gpu.sh

bench-dry-run:
	@python3 bench/run.py --dry-run

tuned: all
	@python3 bench/tuned.py --build $(B)/tuned --tilec $(B)/tilec

# The kernels a new user wrote from the docs alone (bench/user/), for bench/user_kernels.py on the
# GPU: each at the user's own -D values, the GEMM also at the bench's tile beside the example.
GEMM_BENCH_TILE := -D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=4
.PHONY: user-prep
user-prep: $(B)/tilec
	@mkdir -p $(B)/user
	@for k in geglu rmsres colmax colmax_atomic gemm_silu softmax_t wgrad; do \
	  $(B)/tilec bench/user/$$k.tile --arch=sm_90a -o $(B)/user/$$k.ptx || exit 1; done
	$(B)/tilec bench/user/gemm_silu.tile $(GEMM_BENCH_TILE) --arch=sm_90a -o $(B)/user/gemm_silu_tuned.ptx
	$(B)/tilec dsl/examples/gemm.tile $(GEMM_BENCH_TILE) -D ACT=1 --arch=sm_90a -o $(B)/user/gemm_relu_example.ptx
	$(B)/tilec bench/user/colmax_split.tile --arch=sm_90a -o $(B)/user/colmax_split.ptx
	$(B)/tilec bench/user/colmax_split.tile -D ROWS=1024 --arch=sm_90a -o $(B)/user/colmax_split_r1024.ptx
	$(B)/tilec bench/user/colmax_split.tile -D ROWS=512 --arch=sm_90a -o $(B)/user/colmax_split_r512.ptx
	$(B)/tilec bench/user/colmax_split.tile -D ROWS=1024 -D STAGES=4 --arch=sm_90a -o $(B)/user/colmax_split_r1024s4.ptx
	$(B)/tilec bench/user/colmax.tile -D BN=32 --arch=sm_90a -o $(B)/user/colmax_bn32.ptx
	TILEC_TRANS_A=0 $(B)/tilec bench/user/wgrad.tile --arch=sm_90a -o $(B)/user/wgrad_regs.ptx
	$(B)/tilec bench/user/wgrad.tile -D STAGES=3 --arch=sm_90a -o $(B)/user/wgrad_s3.ptx
	TILEC_STORE_RING=0 $(B)/tilec bench/user/wgrad.tile --arch=sm_90a -o $(B)/user/wgrad_keep.ptx
	@git rev-parse HEAD > $(B)/user/COMMIT
