# tests/golden/golden.mk — included by the top-level Makefile.
#
# make golden-update   rewrites tests/golden/** from the current compiler; review with
#                      `git diff tests/golden` before committing.

.PHONY: golden-update
golden-update: $(B)/tilec
	B=$(B) bash tests/check_golden_tir.sh --update
