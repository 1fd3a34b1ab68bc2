#!/usr/bin/env bash
# check_python.sh — the compile API and the Python package, no GPU needed:
#  1. `make install PREFIX=<tmp>` installs tilec_api.h, libtilec.so and tilec.pc; tests/api/api_test.c
#     builds against them with pkg-config and runs (diagnostics, PTX, a CPU kernel, threads);
#  2. python/tests (unittest) end to end on numpy through the interpreter, with the libraries of
#     $B: diagnostics, dtypes, strides, scalars, contract errors, JIT cache, autotune pruning;
#  3. pip installs the package (no build isolation: Debian's setuptools) and it imports.
# Debian's /usr/bin/python3 is used by default (a pyenv python3 on PATH cannot see python3-numpy).
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
PY=${PYTHON:-/usr/bin/python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
bad() { echo "check_python: FAIL: $*"; fail=1; }

# 1. the installed C API
if make --no-print-directory -s install PREFIX="$W/prefix" B="$B" >"$W/install.log" 2>&1; then
  for f in include/tilec_api.h include/tilert.h lib/libtilec.so lib/libtilert.so lib/pkgconfig/tilec.pc; do
    [ -e "$W/prefix/$f" ] || bad "make install did not install $f"
  done
  export PKG_CONFIG_PATH="$W/prefix/lib/pkgconfig"
  if cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror $(pkg-config --cflags tilec) \
       tests/api/api_test.c $(pkg-config --libs tilec) -lpthread -o "$W/api_test"; then
    "$W/api_test" || bad "api_test failed"
  else
    bad "api_test does not build against the installed tilec.pc"
  fi
else
  cat "$W/install.log"; bad "make install PREFIX=$W/prefix failed"
fi

# 2. the package's tests
if ! "$PY" -c "import numpy" 2>/dev/null; then
  bad "$PY cannot import numpy (apt-get install python3-numpy, or set PYTHON=)"
else
  TILEC_LIB_DIR="$PWD/$B" TILEC_BIN="$PWD/$B/tilec" "$PY" -W error::ResourceWarning -m unittest discover -s python/tests \
    2>"$W/unittest.log"
  rc=$?
  tail -n 4 "$W/unittest.log"
  [ $rc = 0 ] || { cat "$W/unittest.log"; bad "python/tests failed"; }
  grep -Eq "^Ran [1-9][0-9]* tests" "$W/unittest.log" || bad "python/tests ran no test"
fi

# 3. pip install (into a folder), then the installed copy finds the libraries through TILEC_LIB_DIR
if "$PY" -m pip --version >/dev/null 2>&1; then
  if "$PY" -m pip install -q --no-build-isolation --no-deps --target "$W/site" ./python \
       >"$W/pip.log" 2>&1; then
    (cd "$W" && PYTHONPATH="$W/site" TILEC_LIB_DIR="$OLDPWD/$B" TILEC_CACHE_DIR="$W/cache" "$PY" -c "
import tilec
k = tilec.compile('kernel k(X: f32[N]) grid (1) threads (32) { }', target='cpu')
assert tilec.__file__.startswith('$W/site'), tilec.__file__
assert k.name == 'k'
") || bad "the pip-installed package does not work"
  else
    cat "$W/pip.log"; bad "pip install --no-build-isolation ./python failed"
  fi
else
  echo "check_python: note: no pip for $PY, pip install not checked"
fi
[ $fail = 0 ] && echo "check_python: passed"
exit $fail
