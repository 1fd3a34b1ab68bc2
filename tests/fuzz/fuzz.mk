# tests/fuzz/fuzz.mk — `make fuzz FUZZ_SECONDS=N`: libFuzzer over parse + sema (clang 14,
# -fsanitize=fuzzer,address), seeded with dsl/examples and tests/diag. Include from the Makefile.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: $(B)/compiler/parser.c $(B)/compiler/lexer.c
	FUZZ_SECONDS=$(FUZZ_SECONDS) B=$(B) bash tests/check_fuzz.sh
