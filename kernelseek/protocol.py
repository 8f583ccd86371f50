"""The worker's reply protocol, parent side: exactly one reply per request, carrying its nonce.

A worker that loads a candidate library runs the candidate's host code in the same process that
writes replies, so a reply is only believed when:
  - it echoes the request's nonce (16 random bytes from os.urandom, new for every request: a line
    written before the request arrived cannot carry it);
  - it is the only thing that came: bytes after the reply's newline in the same read, or bytes
    arriving between requests (a second reply, a thread still writing after its call returned) are a
    violation.
A violation kills the worker (worker_proc.Worker) and is kept (`Worker.violation`): the evaluation then
fails every row of that worker's library (evaluate.py), since no reply of a process that wrote one
can be told from a forged one. Code inside the process can still read the nonce from the
interpreter's memory and suppress the real reply; the host-code gate (host_gate.py) keeps it from
getting there, and the wall-clock check (corroborate.py) bounds the times it could claim.
"""
from __future__ import annotations

import json
import os
import select

NONCE_BYTES = 16


def new_nonce() -> str:
    return os.urandom(NONCE_BYTES).hex()


class Violation(Exception):
    """The worker broke the protocol; str() says how (one line)."""


def parse_reply(line: str, nonce: str, rest: bytes) -> dict:
    """The reply object from one line, or Violation / ValueError (malformed JSON). `rest`: bytes
    that came after the line's newline."""
    reply = json.loads(line)
    if not isinstance(reply, dict) or "status" not in reply:
        raise ValueError("reply is not an object with a status")
    got = reply.pop("nonce", None)
    if got != nonce:
        raise Violation(f"reply without this request's nonce (got {str(got)[:40]!r}): "
                        f"a line the request did not ask for: {line[:120]!r}")
    if rest:
        raise Violation(f"{len(rest)} bytes after the reply (a second reply?): {rest[:80]!r}")
    return reply


def stray_bytes(fd: int, limit: int = 1 << 16) -> bytes:
    """Whatever is waiting on the reply pipe now (b"" when nothing): between requests, nothing may."""
    out = b""
    while len(out) < limit:
        r, _, _ = select.select([fd], [], [], 0)
        if not r:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:                       # end of file: the child closed it (exit), not a reply
            break
        out += chunk
    return out
