"""The JIT cache on disk: PTX per (source, defines, arch, opt level, kernel, compiler build id),
tuning winners per (source, GPU, arch, key bucket, ...).

Directory: $TILEC_CACHE_DIR, else $XDG_CACHE_HOME/tilec, else ~/.cache/tilec; TILEC_CACHE=0 turns
the disk cache off. Entries are written to a temporary file in the same folder and renamed into
place (atomic on POSIX), so processes sharing the cache never see half an entry; two processes
compiling the same kernel at once both write the same bytes and the last rename wins.
"""
import hashlib
import json
import os
import tempfile


def directory():
    d = os.environ.get("TILEC_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "tilec")
    return d


def enabled():
    return os.environ.get("TILEC_CACHE", "1") not in ("0", "off", "no", "false")


def digest(*parts):
    """sha256 over the parts, each length-prefixed (so ("ab", "c") and ("a", "bc") differ)."""
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(b"%d:" % len(b))
        h.update(b)
    return h.hexdigest()


def _path(kind, key, ext):
    return os.path.join(directory(), kind, key[:2], key + ext)


def read_text(kind, key, ext):
    if not enabled():
        return None
    try:
        with open(_path(kind, key, ext), "r", encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def write_text(kind, key, ext, text):
    """Writes atomically; a cache that cannot be written is not an error (the result stands)."""
    if not enabled():
        return False
    path = _path(kind, key, ext)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return True
    except OSError:
        return False


def read_json(kind, key):
    text = read_text(kind, key, ".json")
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def write_json(kind, key, obj):
    return write_text(kind, key, ".json", json.dumps(obj, indent=1, sort_keys=True))
