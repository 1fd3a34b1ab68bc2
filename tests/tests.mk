# tests/tests.mk — included by the top-level Makefile.
#
# make test = deps + build + test-run. test-run runs the Criterion unit tests (tests/unit/test_*.c,
# one binary), then every tests/check_*.sh, two at a time (tests/run_tests.sh: golden, diagnostics,
# ptxas, sanitizers, fuzzing). Each script gets B=<build dir> in its environment and exits non-zero on failure.

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_OBJ := $(UNIT_SRC:%.c=$(B)/%.o)
# Test objects see the float64 references' header (tests/ref/ref.h).
$(B)/tests/%.o: tests/%.c compiler/*.h runtime/*.h tests/ref/ref.h $(B)/compiler/parser.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_OWN) -Itests/ref -c $< -o $@

$(B)/tests/unit_tests: $(UNIT_OBJ) $(NVPTX_OBJ) $(B)/compiler/driver.o $(B)/libtilec.a $(B)/libtilert.a
	$(CC) -o $@ $(UNIT_OBJ) $(NVPTX_OBJ) $(B)/compiler/driver.o $(LINK_TILEC) $(B)/libtilert.a -lcriterion $(LLVM_LIBS) -ldl -lm

.PHONY: test test-run unit
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all $(B)/tests/unit_tests $(B)/example_runner
	@$(MAKE) --no-print-directory test-run

unit: $(B)/tests/unit_tests
	$(B)/tests/unit_tests $(UNIT_ARGS)

# The unit tests, then the check scripts two at a time (tests/run_tests.sh), each one's seconds
# printed after it, so the slow ones show (make test stays well under 10 min).
test-run:
	@B=$(B) UNIT_ARGS='$(subst ','\'',$(UNIT_ARGS))' bash tests/run_tests.sh

# ---------------------------------------------------------------- examples: demo and gpu-test
REF_SRC := $(sort $(wildcard tests/ref/*.c))
REF_OBJ := $(REF_SRC:%.c=$(B)/%.o)

$(B)/example_runner: $(B)/tests/example_runner.o $(REF_OBJ) $(B)/libtilec.a $(B)/libtilert.a
	$(CC) -o $@ $(B)/tests/example_runner.o $(REF_OBJ) $(LINK_TILEC) $(B)/libtilert.a -ldl -lm

.PHONY: demo gpu-prep gpu-test
# Compiles every example with build/tilec, runs it (GPU if present, else the interpreter) and
# checks it against the float64 reference.
# On a GPU machine without LLVM (a build/ carried from a build machine by `make gpu-prep`), it runs
# the prebuilt runner on the prebuilt PTX instead of building.
demo:
	@if [ -z "$(LLVM_CONFIG)" ] && [ -x $(B)/example_runner ] && ls $(B)/ptx/*.ptx >/dev/null 2>&1; then \
	  echo "demo: no LLVM here; running the prebuilt $(B)/example_runner on $(B)/ptx"; \
	  $(B)/example_runner --suite=demo --ptx-dir $(B)/ptx; \
	else \
	  $(MAKE) --no-print-directory deps && \
	  $(MAKE) --no-print-directory all $(B)/example_runner && mkdir -p $(B)/ptx && \
	  $(B)/example_runner --suite=demo --tilec $(B)/tilec --ptx-dir $(B)/ptx; \
	fi

# Here (with LLVM): the PTX of every GPU case, so the GPU machine needs no compiler.
gpu-prep: all $(B)/example_runner
	@mkdir -p $(B)/ptx
	@$(B)/example_runner --suite=gpu --list | while read id file defs; do \
	  case $$id in *_cluster) cl=1 ;; *) cl= ;; esac; case $$id in *_pingpong) pp=1 ;; *) pp= ;; esac; \
	  case $$id in attn_rot_*) rot=1 ;; *) rot= ;; esac; case $$id in *_nt) nt=0 ;; *) nt= ;; esac; \
	  case $$id in *_shift) sh=1; al=0 ;; *) sh= ; al= ;; esac; case $$id in *_nostore) ns=0 ;; *) ns= ;; esac; \
	  case $$id in *_pk0) pk=0 ;; *) pk= ;; esac; case $$id in *_priv) pv=1 ;; *) pv= ;; esac; \
	  case $$id in *_nib) nib=0 ;; *) nib= ;; esac; case $$id in *_fa) fa=1 ;; *) fa= ;; esac; \
	  case $$id in *_xp4) xp=4 ;; *) xp= ;; esac; case $$id in *_nic) ic=0 ;; *) ic= ;; esac; \
	  TILEC_CLUSTER=$$cl TILEC_PINGPONG=$$pp TILEC_ROTATE=$$rot TILEC_WG_TURNS=$$nt TILEC_SHIFTED=$$sh TILEC_ALIGN_WINDOWS=$$al TILEC_TMA_STORE=$$ns \
	  TILEC_CVT_PACK=$$pk TILEC_PRIVATE_RING=$$pv TILEC_IDLE_BANDS=$$nib TILEC_FULL_ALIGNED=$$fa TILEC_EXP_POLY=$$xp TILEC_INDEX_COMPARE=$$ic \
	  $(B)/tilec $$file $$defs --arch=sm_90a --emit=ptx -o $(B)/ptx/$$id.ptx || exit 1; done
	@mkdir -p $(B)/aot $(B)/probe
	$(B)/tilec tests/gpu/order_global.tile --arch=sm_90a -o $(B)/probe/order_global.ptx
	$(B)/tilec tests/gpu/order_global_loop.tile --arch=sm_90a -o $(B)/probe/order_global_loop.ptx
	$(B)/tilec dsl/examples/vadd.tile --emit=c --arch=sm_80 --arch=sm_90a --cubin -o $(B)/aot/vadd
	$(B)/tilec dsl/examples/softmax.tile --emit=c --arch=sm_90a -o $(B)/aot/softmax
	$(B)/tilec dsl/examples/layernorm_backward.tile --emit=c --arch=sm_80 --arch=sm_90a -o $(B)/aot/ln
	$(CC) -std=c11 -O2 -I$(B)/aot -Icompiler -Itests/ref -I$(CUDA)/include tests/aot/bundle_gpu.c \
	  $(B)/aot/ln.c $(REF_SRC) $(B)/libtilec.a -L$(CUDA)/lib64/stubs -lcuda -ldl -lm -o $(B)/aot/bundle_gpu
	$(B)/tilec dsl/examples/gemm.tile -D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=4 -D ACT=2 \
	  --emit=c --arch=sm_90a -o $(B)/aot/gw
	$(CC) -std=c11 -O2 -I$(B)/aot -Icompiler -Itests/ref -I$(CUDA)/include tests/aot/ws_gpu.c \
	  $(B)/aot/gw.c $(REF_SRC) $(B)/libtilec.a -L$(CUDA)/lib64/stubs -lcuda -ldl -lm -o $(B)/aot/ws_gpu
	$(B)/tilec bench/ab/cross_entropy_backward_split.tile --emit=c --arch=sm_90a -o $(B)/aot/xc
	TILEC_CLUSTER=1 $(B)/tilec dsl/examples/gemm.tile -D BM=128 -D BN=128 -D BK=64 -D WARPS=8 -D STAGES=4 \
	  --emit=c --arch=sm_90a -o $(B)/aot/gc
	$(CC) -std=c11 -O2 -I$(B)/aot -Icompiler -Itests/ref -I$(CUDA)/include tests/aot/cluster_gpu.c \
	  $(B)/aot/xc.c $(B)/aot/gc.c $(REF_SRC) $(B)/libtilec.a -L$(CUDA)/lib64/stubs -lcuda -ldl -lm -o $(B)/aot/cluster_gpu
	@$(MAKE) --no-print-directory tuned
	$(CC) -std=c11 -O2 -I$(B)/tuned -Icompiler -Itests/ref -I$(CUDA)/include tests/aot/tuned_gpu.c \
	  $(B)/tuned/*.c $(REF_SRC) $(B)/libtilec.a -L$(CUDA)/lib64/stubs -lcuda -ldl -lm -o $(B)/tuned/tuned_gpu
	@git rev-parse HEAD > $(B)/COMMIT 2>/dev/null; git diff --quiet 2>/dev/null || echo dirty >> $(B)/COMMIT
	@echo "gpu-prep: $$(ls $(B)/ptx/*.ptx | wc -l) PTX files in $(B)/ptx"

# One file to carry to the GPU machine (the device tool carries at most 64 MiB, build/ is more):
# what gpu-test and the bench need, xz-compressed (a few MiB); tests/gpu/device_all.sh unpacks it.
# After `make gpu-prep bench-prep`.
.PHONY: device-carry
device-carry:
	@git rev-parse HEAD > $(B)/COMMIT 2>/dev/null; git diff --quiet 2>/dev/null || echo dirty >> $(B)/COMMIT
	@tar -cJf $(B)/carry.tar.xz $(B)/ptx $(B)/example_runner $(B)/libtilert.a $(B)/libtilert.so $(B)/aot $(B)/tuned \
	  $(B)/COMMIT $(B)/bench/libbaselines.so $(B)/bench/commit.txt $(B)/bench/ptx/*.ptx \
	  $(wildcard $(B)/probe/*.ptx)
	@ls -la $(B)/carry.tar.xz

# On the GPU machine, from a carried build/ (builds nothing).
gpu-test:
	bash tests/gpu/run_gpu_tests.sh
