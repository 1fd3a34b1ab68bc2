"""Exceptions. Compile errors carry tilec's diagnostics exactly as the command line prints them;
launch errors carry the runtime's message (which names the kernel, the argument and the rule)."""
from . import _lib


class TilecError(Exception):
    """Base of every tilec exception."""


class CompileError(TilecError):
    """The kernel did not compile. `diagnostics`: file:line:col: error: ... with the source line
    and a caret, as `tilec` prints them."""

    def __init__(self, diagnostics):
        super().__init__(diagnostics.rstrip("\n"))
        self.diagnostics = diagnostics


class CompileWarning(UserWarning):
    """A kernel compiled with warnings (the text is tilec's diagnostics)."""


class CompilerUnavailable(TilecError):
    """A compile was needed (not in the JIT cache) but libtilec.so cannot be loaded here."""


class LaunchError(TilecError, RuntimeError):
    """The runtime refused or failed a launch. `code`: the tilert_code name."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class ArgumentError(LaunchError, TypeError):
    """Wrong number, kind or dtype of arguments (TILERT_ERROR_INVALID_ARGUMENT and the package's
    own checks)."""


class ShapeError(LaunchError, ValueError):
    """Shapes, strides or alignment break the kernel's contract, or a `require` is false."""


def from_status(st):
    """The exception for a failed tilert_status."""
    code = _lib.CODES[st.code] if 0 <= st.code < len(_lib.CODES) else "TILERT_ERROR_%d" % st.code
    msg = st.message.decode(errors="replace")
    if code == "TILERT_ERROR_INVALID_ARGUMENT":
        return ArgumentError(code, msg)
    if code in ("TILERT_ERROR_SHAPE", "TILERT_ERROR_REQUIREMENT"):
        return ShapeError(code, msg)
    return LaunchError(code, msg)


def check(st):
    if st.code:
        raise from_status(st)
