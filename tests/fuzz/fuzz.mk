# tests/fuzz/fuzz.mk — `make fuzz FUZZ_SECONDS=N`: each libFuzzer target (clang 14) for N seconds:
# fuzz_frontend (parse + sema, -fsanitize=fuzzer,address) and fuzz_pipeline (parse through the
# TIR passes, the metadata round trip, tilert_bind and the interpreter, +undefined), seeded with
# dsl/examples and tests/diag (tests/check_fuzz.sh). FUZZ_TARGETS=NAME runs one. Include from the
# Makefile.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: $(B)/compiler/parser.c $(B)/compiler/lexer.c
	FUZZ_SECONDS=$(FUZZ_SECONDS) B=$(B) bash tests/check_fuzz.sh
