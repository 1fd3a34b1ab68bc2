# tilec — build, test, demo. Out-of-tree: everything generated goes to build/.
#
#   make            build/tilec, build/libtilec.a (compiler without LLVM), build/libtilert.{a,so}
#   make deps       install missing Debian packages (as root), else print the apt-get line
#   make test       unit + golden + diagnostics + ptxas + sanitizer + fuzz tests (no GPU needed)
#   make demo       compile and run every example (GPU when present, else the interpreter)
#   make gpu-test   GPU correctness + compute-sanitizer (on the GPU machine, from a carried build/)
#   make bench      benchmarks on the GPU machine
#   make install PREFIX=/usr/local ; make clean ; make fuzz FUZZ_SECONDS=N ; make golden-update

.DEFAULT_GOAL := all
SHELL := /bin/bash

B := build
PREFIX ?= /usr/local
CUDA ?= /usr/local/cuda
LLVM_CONFIG ?= $(shell command -v llvm-config-19 2>/dev/null || command -v llvm-config 2>/dev/null)
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

WARN := -Wall -Wextra -Werror
CSTD := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
OPT ?= -O2 -g
CFLAGS_BASE := $(CSTD) $(OPT) -fPIC -Icompiler -Iruntime -I$(B)/compiler -I$(CUDA)/include
CFLAGS_OWN := $(CFLAGS_BASE) $(WARN)
# Generated lexer/parser: their own flags (flex output trips -Wextra).
CFLAGS_GEN := $(CFLAGS_BASE) -Wno-unused-function -Wno-sign-compare -Wno-unused-parameter
LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --cflags)
LLVM_LIBS = $(shell $(LLVM_CONFIG) --ldflags --libs nvptx passes) -Wl,-rpath,$(shell $(LLVM_CONFIG) --libdir)

DEB_PACKAGES := llvm-19-dev flex bison libfl-dev libcriterion-dev libzstd-dev clang libclang-rt-14-dev \
  python3-numpy python3-setuptools pkgconf

# ---------------------------------------------------------------- sources
COMPILER_ALL := $(sort $(wildcard compiler/*.c))
NVPTX_SRC := $(wildcard compiler/lower_nvptx*.c)
# The command line and the back half of the pipeline (which calls the LLVM backend) go only into
# build/tilec; libtilec.a (front end, TIR, interpreter) needs no LLVM, so the demo and GPU test
# programs link without it.
MAIN_SRC := compiler/main.c compiler/driver.c
MAIN_OBJ := $(MAIN_SRC:%.c=$(B)/%.o)
# The public compile API (tilec_api.h): only in libtilec.so, with the backend it calls.
API_SRC := compiler/api.c
LIB_SRC := $(filter-out $(NVPTX_SRC) $(MAIN_SRC) $(API_SRC),$(COMPILER_ALL))
GEN_SRC := $(B)/compiler/parser.c $(B)/compiler/lexer.c
RUNTIME_SRC := $(sort $(wildcard runtime/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o) $(GEN_SRC:.c=.o)
NVPTX_OBJ := $(NVPTX_SRC:%.c=$(B)/%.o)
RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(B)/%.o)

.PHONY: all deps test demo gpu-test bench install clean fuzz golden-update check-deps
all: $(B)/tilec $(B)/libtilec.a $(B)/libtilert.a $(B)/libtilert.so $(B)/libtilec.so

# ---------------------------------------------------------------- deps
# Installs what is missing (apt-get update first); as non-root, prints the command instead.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: missing$$missing; run as root:"; \
	  echo "  apt-get update && apt-get install -y --no-install-recommends$$missing"; exit 1; fi
	@[ -f $(CUDA)/include/cuda.h ] || { echo "deps: $(CUDA)/include/cuda.h not found: the runtime needs the CUDA toolkit's headers (types only; set CUDA=/path/to/cuda)"; exit 1; }
	@[ -x $(CUDA)/bin/ptxas ] || echo "deps: note: $(CUDA)/bin/ptxas not found: the ptxas checks of make test will be skipped"

# ---------------------------------------------------------------- compiler
$(B)/compiler/parser.c $(B)/compiler/parser.h: compiler/parser.y
	@mkdir -p $(@D)
	bison -Wall -Werror --defines=$(B)/compiler/parser.h -o $(B)/compiler/parser.c $<

$(B)/compiler/lexer.c $(B)/compiler/lexer.h: compiler/lexer.l $(B)/compiler/parser.h
	@mkdir -p $(@D)
	flex --header-file=$(B)/compiler/lexer.h -o $(B)/compiler/lexer.c $<

$(B)/compiler/parser.o $(B)/compiler/lexer.o: %.o: %.c compiler/*.h $(B)/compiler/parser.h $(B)/compiler/lexer.h
	$(CC) $(CFLAGS_GEN) -c $< -o $@

$(B)/compiler/%.o: compiler/%.c compiler/*.h runtime/tilert.h $(B)/compiler/parser.h $(B)/compiler/lexer.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_OWN) -c $< -o $@

$(NVPTX_OBJ): $(B)/compiler/%.o: compiler/%.c compiler/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_OWN) $(LLVM_CFLAGS) -c $< -o $@

$(B)/libtilec.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# libtilec.a is linked whole: every stage object is in, none can silently go missing.
LINK_TILEC = -Wl,--whole-archive $(B)/libtilec.a -Wl,--no-whole-archive

$(B)/tilec: $(MAIN_OBJ) $(NVPTX_OBJ) $(B)/libtilec.a $(B)/libtilert.a
	$(CC) -o $@ $(MAIN_OBJ) $(NVPTX_OBJ) $(LINK_TILEC) $(B)/libtilert.a $(LLVM_LIBS) -ldl -lm

# ---------------------------------------------------------------- libtilec.so (tilec_api.h)
# The whole compiler with the LLVM backend; exports only tilec_* (compiler/libtilec.map), takes
# the runtime from libtilert.so next to it ($$ORIGIN). TILEC_BUILD_ID digests the compiler's
# sources and the LLVM version: JIT caches key on it (tilec_build_id()).
TILEC_BUILD_ID := $(shell { cat compiler/*.c compiler/*.h compiler/*.l compiler/*.y runtime/meta.c; \
  $(LLVM_CONFIG) --version; } 2>/dev/null | sha256sum | cut -c1-16)
LIBTILEC_OBJ := $(B)/compiler/api.o $(B)/compiler/driver.o $(NVPTX_OBJ)
LIBTILEC_LINK = $(LIBTILEC_OBJ) $(LINK_TILEC) -L$(B) -ltilert -Wl,-rpath,'$$ORIGIN' \
  -Wl,--version-script=compiler/libtilec.map -Wl,--no-undefined

.PHONY: FORCE libtilec-static
$(B)/compiler/build_id.h: FORCE
	@mkdir -p $(@D)
	@echo '#define TILEC_BUILD_ID "$(TILEC_BUILD_ID)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
$(B)/compiler/api.o: $(B)/compiler/build_id.h

$(B)/libtilec.so: $(LIBTILEC_OBJ) $(B)/libtilec.a $(B)/libtilert.so compiler/libtilec.map
	$(CC) -shared -o $@ $(LIBTILEC_LINK) $(LLVM_LIBS) -ldl -lm

# The same with LLVM linked in (~40 MB, slow to link): runs where no LLVM is installed (the GPU
# machine). `make python-dist` puts it next to libtilert.so.
LLVM_STATIC_LIBS = $(shell $(LLVM_CONFIG) --link-static --ldflags --libs nvptx passes) \
  $(shell $(LLVM_CONFIG) --link-static --system-libs)
libtilec-static: $(B)/static/libtilec.so
$(B)/static/libtilec.so: $(LIBTILEC_OBJ) $(B)/libtilec.a $(B)/libtilert.so compiler/libtilec.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(LIBTILEC_LINK) -Wl,--exclude-libs,ALL -Wl,--gc-sections $(LLVM_STATIC_LIBS) \
	  -lstdc++ -ldl -lm

# ---------------------------------------------------------------- runtime
$(B)/runtime/%.o: runtime/%.c runtime/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_OWN) -c $< -o $@

$(B)/libtilert.a: $(RUNTIME_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/libtilert.so: $(RUNTIME_OBJ)
	$(CC) -shared -o $@ $^ -ldl -lm

-include tests/tests.mk
-include bench/bench.mk
-include tests/golden/golden.mk
-include tests/fuzz/fuzz.mk

install: all
	install -d $(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/include $(PREFIX)/lib/pkgconfig
	install -m 755 $(B)/tilec $(PREFIX)/bin/tilec
	install -m 644 $(B)/libtilert.a $(B)/libtilert.so $(PREFIX)/lib/
	install -m 755 $(B)/libtilec.so $(PREFIX)/lib/
	install -m 644 runtime/tilert.h compiler/tilec_api.h $(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/^#define TILEC_VERSION "\(.*\)"/\1/p' compiler/tilec.h)|' \
	  compiler/tilec.pc.in > $(PREFIX)/lib/pkgconfig/tilec.pc

# The Python package with its libraries inside (python/tilec/lib: libtilert.so and the
# self-contained libtilec.so), for a machine without LLVM such as the GPU machine: carry
# python/tilec/lib along with the checkout. docs/python.md.
.PHONY: python-dist
python-dist: $(B)/libtilert.so $(B)/static/libtilec.so
	@mkdir -p python/tilec/lib
	cp $(B)/libtilert.so python/tilec/lib/
	strip --strip-unneeded -o python/tilec/lib/libtilec.so $(B)/static/libtilec.so
	@{ git rev-parse HEAD; git diff --quiet HEAD -- compiler runtime python || echo dirty; } \
	  > python/tilec/lib/COMMIT 2>/dev/null || true

clean:
	rm -rf $(B)
