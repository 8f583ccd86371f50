"""Secrets out of everything a campaign writes: traces, notebooks, logs, error messages.

A Redactor knows the values of the credential-like environment variables (ANTHROPIC_API_KEY and
any name matching SECRET_NAME) and replaces each wherever it appears, also reversed, in hex, and in
base64 (standard and URL-safe, at any byte alignment, wrapped over lines as `base64` prints it), with
[redacted:NAME]; API-key-like tokens (sk-ant-..., bearer ...) are replaced whatever their source.
The agent's sandbox never holds the key (confine.clean_env), so these forms matter for a key that
reaches a text some other way: an API error that echoes it, a person pasting it.

    red = Redactor.from_env()
    red.text(s); red(event_dict); scrub_file(notebook_path)
    with redacting_errors(): ...        # exceptions leave with their messages redacted
"""
from __future__ import annotations

import base64
import os
import re
from contextlib import contextmanager
from pathlib import Path

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
SECRET_PATTERNS = (re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
                   re.compile(r"(?i)\b(bearer|x-api-key:?)\s+[A-Za-z0-9._\-]{16,}"))
MIN_LEN = 8           # shorter values are not treated as secrets (too many false hits)
MIN_ENCODED = 16      # encoded forms are searched only for values at least this long


def _b64_cores(raw: bytes) -> list[str]:
    """The base64 characters fixed by `raw` alone, for each of the 3 alignments it can start at."""
    out = []
    for k in range(3):
        enc = base64.b64encode(bytes(k) + raw).decode()
        lo, hi = -(-8 * k // 6), (8 * (k + len(raw))) // 6        # ceil(8k/6) .. floor(8(k+n)/6)
        core = enc[lo:hi]
        out += [core, core.translate(str.maketrans("+/", "-_"))]
    return out


def forms(value: str) -> list[str]:
    """The value and the encodings of it that a redactor also looks for."""
    out = [value]
    if len(value) >= MIN_ENCODED:
        raw = value.encode()
        out += [value[::-1], raw.hex(), raw.hex().upper(), *_b64_cores(raw), *_b64_cores(value[::-1].encode())]
    return list(dict.fromkeys(out))


def _wrapped(form: str) -> str:
    """A regex matching `form` with line breaks anywhere (base64 and hexdump wrap their lines)."""
    return r"(?:\r?\n)?".join(re.escape(c) for c in form)


class Redactor:
    """Replaces secret values (and their encodings) in any string of a structure with [redacted:NAME]."""

    def __init__(self, secrets: dict[str, str] | None = None):
        self.secrets = {k: v for k, v in (secrets or {}).items() if isinstance(v, str) and len(v) >= MIN_LEN}
        pats = []
        for name, val in sorted(self.secrets.items(), key=lambda kv: -len(kv[1])):
            for f in forms(val):
                pats.append((re.compile(_wrapped(f) if len(f) >= MIN_ENCODED else re.escape(f)), name))
        self._pats = pats

    @classmethod
    def from_env(cls, environ=None) -> "Redactor":
        env = os.environ if environ is None else environ
        return cls({k: v for k, v in env.items() if SECRET_NAME.search(k)})

    def text(self, s: str) -> str:
        for pat, name in self._pats:
            s = pat.sub(f"[redacted:{name}]", s)
        for pat in SECRET_PATTERNS:
            s = pat.sub("[redacted]", s)
        return s

    def __call__(self, x):
        if isinstance(x, str):
            return self.text(x)
        if isinstance(x, dict):
            return {k: self(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [self(v) for v in x]
        return x


def redact_exception(exc: BaseException, red: Redactor | None = None) -> BaseException:
    """Redact the messages of `exc` and of every exception chained to it, in place; returns it."""
    red = red or Redactor.from_env()
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.args = tuple(red(a) if isinstance(a, str) else a for a in e.args)
        for attr in ("message", "evalue", "body"):          # anthropic.APIError, papermill's error
            v = getattr(e, attr, None)
            if isinstance(v, (str, dict, list)):
                try:
                    setattr(e, attr, red(v))
                except AttributeError:
                    pass
        e = e.__cause__ or e.__context__
    return exc


@contextmanager
def redacting_errors(red: Redactor | None = None):
    """Any exception leaving the block has its (and its causes') messages redacted first."""
    try:
        yield
    except BaseException as e:
        redact_exception(e, red)
        raise


def redacting(log, red: Redactor | None = None):
    """A print-like function that redacts its arguments first (None stays None)."""
    if log is None:
        return None
    red = red or Redactor.from_env()

    def out(*args, **kw):
        return log(*(red(a) if isinstance(a, str) else a for a in args), **kw)
    return out


def scrub_file(path, red: Redactor | None = None) -> bool:
    """Redact a text file in place (atomically); True when something was replaced."""
    p = Path(path)
    if not p.is_file():
        return False
    red = red or Redactor.from_env()
    old = p.read_text(errors="replace")
    new = red.text(old)
    if new == old:
        return False
    _replace(p, new)
    return True


def _replace(p: Path, text: str) -> None:
    """Write `text` to `p` whole (a temporary file renamed over it)."""
    tmp = p.with_name(p.name + ".redacting")
    tmp.write_text(text)
    os.replace(tmp, p)


def _scrub_json(x, red: Redactor):
    if isinstance(x, str):
        return red.text(x)
    if isinstance(x, list) and x and all(isinstance(v, str) for v in x):
        joined = "".join(x)                     # notebook text is a list of lines: a wrapped form spans them
        new = red.text(joined)
        return x if new == joined else new.splitlines(keepends=True)
    if isinstance(x, list):
        return [_scrub_json(v, red) for v in x]
    if isinstance(x, dict):
        return {k: _scrub_json(v, red) for k, v in x.items()}
    return x


def scrub_notebook(path, red: Redactor | None = None) -> bool:
    """Redact every string of an .ipynb (outputs, tracebacks, sources, metadata) in place."""
    import json
    p = Path(path)
    if not p.is_file():
        return False
    red = red or Redactor.from_env()
    try:
        doc = json.loads(p.read_text())
    except ValueError:
        return scrub_file(p, red)
    new = _scrub_json(doc, red)
    if new == doc:
        return False
    _replace(p, json.dumps(new, indent=1, ensure_ascii=False) + "\n")
    return True
