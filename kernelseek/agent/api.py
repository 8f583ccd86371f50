"""One Messages API call for the loop: retried here, every retry and every bad reply recorded.

    caller = Caller(make_client(base_url), emit, max_retries=4)
    reply = caller.create(request_kwargs, step=7, time_left=lambda: 120.0)   # Reply, or raises

The anthropic client retries connection errors, 408, 409, 429 and >= 500 on its own, twice by
default and silently (anthropic-sdk-python README, "Retries": `max_retries`). The loop's client is
made with max_retries=0 so each retry happens here and becomes a `retry` trace event (attempt,
status, why, wait). Retried: connection errors and timeouts, 408, 409, 429 rate_limit_error,
500 api_error, 502-504, 529 overloaded_error (docs.claude.com/en/api/errors: 429 and 529 are
transient; 429 carries retry-after), and a 200 whose body is not a message. The wait is the
server's retry-after-ms or retry-after (seconds) header, else 1, 2, 4, ... s (at most 60) with
jitter; a wait longer than the wall-time budget left gives up at once.
Not retried: 400, 401, 403, 404, 413: the request itself is wrong. A 400 "prompt is too long" (or
a 413) raises PromptTooLong so the loop can compact the conversation and try again.

A 200 is parsed here, from the raw bytes, never trusted: it must be a JSON object of type
"message", role "assistant", with a list of typed content blocks and integer usage; anything else
is an `error` event (kind malformed_reply) and a retry, never a usage event.
"""
from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass, field

from ..traces import Redactor

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
MAX_WAIT_S = 60.0
TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens?\s*>\s*(\d+)", re.I)


class MissingKey(ValueError):
    """ANTHROPIC_API_KEY is not set (an input error: every command reports it with exit 2)."""


class ApiFailure(RuntimeError):
    """The API call failed for good (a request error, or retries exhausted)."""

    def __init__(self, message: str, status: int | None = None, out_of_time: bool = False):
        super().__init__(message)
        self.status, self.out_of_time = status, out_of_time


class PromptTooLong(ApiFailure):
    """The request is longer than the model's context window (or the 32 MB request limit)."""

    def __init__(self, message: str, tokens: int | None, limit: int | None, status: int = 400):
        super().__init__(message, status)
        self.tokens, self.limit = tokens, limit


class BadReply(ValueError):
    """A 200 whose body is not a message."""


@dataclass
class Reply:
    id: str
    model: str
    content: list                  # blocks as dicts, ready to send back
    stop_reason: str | None
    usage: dict                    # input, output, cache_creation, cache_read tokens (ints)
    retries: list = field(default_factory=list)   # why each retry before this reply happened


def make_client(base_url: str | None = None):
    """The anthropic client with the key from ANTHROPIC_API_KEY; retries are the Caller's."""
    key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        raise MissingKey("ANTHROPIC_API_KEY is not set: export the API key of your Anthropic account "
                         "before running a campaign (only the API client gets it; the agent's shell and "
                         "the trace never see it)")
    import anthropic
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=900.0)


# ---- parsing a 200 -------------------------------------------------------------------------------
_FIELDS = {"text": ("text",), "tool_use": ("id", "name", "input"), "thinking": ("thinking", "signature"),
           "redacted_thinking": ("data",)}


def _block(b, i: int) -> dict:
    if not isinstance(b, dict) or not isinstance(b.get("type"), str):
        raise BadReply(f"content.{i} is not a typed block")
    t = b["type"]
    if t not in _FIELDS:                          # a block type this loop does not use: kept as sent
        return {k: v for k, v in b.items() if v is not None}
    out = {"type": t}
    for k in _FIELDS[t]:
        v = b.get(k)
        ok = isinstance(v, dict) if k == "input" else isinstance(v, str)
        if not ok:
            raise BadReply(f"content.{i} ({t}): field '{k}' is missing or has the wrong type")
        out[k] = v
    return out


def parse_reply(data: bytes) -> Reply:
    """A Reply from a 200's body; BadReply naming what is wrong."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadReply(f"the body is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("type") != "message":
        what = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
        raise BadReply(f"the body is not a message (type {what!r})")
    if doc.get("role") != "assistant" or not isinstance(doc.get("content"), list):
        raise BadReply("the message has no assistant role or no content list")
    u = doc.get("usage")
    if not isinstance(u, dict) or not all(isinstance(u.get(k), int) for k in ("input_tokens", "output_tokens")):
        raise BadReply("the message has no integer usage (input_tokens, output_tokens)")
    usage = {k: int(u.get(k) or 0) for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                             "cache_read_input_tokens")}
    stop = doc.get("stop_reason")
    if stop is not None and not isinstance(stop, str):
        raise BadReply("stop_reason is not a string")
    return Reply(str(doc.get("id", "")), str(doc.get("model") or ""),
                 [_block(b, i) for i, b in enumerate(doc["content"])], stop, usage)


def _body(raw) -> bytes:
    """The raw response's bytes, across client versions."""
    http = getattr(raw, "http_response", None)
    if http is not None and hasattr(http, "content"):
        return http.content
    return raw.read()


# ---- the call ------------------------------------------------------------------------------------
def retry_wait(headers, attempt: int) -> float:
    """Seconds before retry `attempt` (0-based): the server's retry-after-ms / retry-after, else backoff."""
    h = {k.lower(): v for k, v in (headers or {}).items()}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            v = float(h[name]) * scale
        except (KeyError, TypeError, ValueError):
            continue
        if v >= 0:
            return min(v, MAX_WAIT_S)
    return min(MAX_WAIT_S, 2.0 ** attempt) * (0.75 + 0.5 * random.random())


def _error_text(e) -> tuple[str, str]:
    body = getattr(e, "body", None)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return str(err.get("type") or ""), str(err.get("message") or "")
    return "", str(getattr(e, "message", "") or e)


class Caller:
    """Sends requests with the loop's retries; `emit(type, **fields)` writes trace events."""

    def __init__(self, client, emit, max_retries: int = 4, sleep=time.sleep):
        if hasattr(client, "with_options"):
            client = client.with_options(max_retries=0)   # every retry is ours, and recorded
        self.client, self.emit, self.max_retries, self.sleep = client, emit, max_retries, sleep
        self.redact = Redactor.from_env()

    def create(self, kw: dict, step: int, time_left=lambda: None) -> Reply:
        import anthropic
        retries = []
        for attempt in range(self.max_retries + 1):
            status, headers = None, {}
            try:
                raw = self.client.messages.with_raw_response.create(**kw)
                status, headers, data = raw.status_code, raw.headers, _body(raw)
            except anthropic.APIStatusError as e:
                status, headers = e.status_code, e.response.headers
                kind, msg = _error_text(e)
                why = self.redact.text(f"{status} {kind}: {msg}".replace(" :", ":"))
                m = TOO_LONG.search(msg)
                if m or status == 413:
                    self.emit("error", where="api", kind="prompt_too_long", status=status, message=why, step=step)
                    raise PromptTooLong(why, int(m.group(1)) if m else None, int(m.group(2)) if m else None,
                                        status) from None
                if status not in RETRY_STATUS:
                    self.emit("error", where="api", kind="request_error", status=status, message=why, step=step)
                    raise ApiFailure(why, status) from None
            except anthropic.APIConnectionError as e:      # includes APITimeoutError
                why = self.redact.text(f"{type(e).__name__}: {e}")
            else:
                try:
                    reply = parse_reply(data)
                    reply.retries = retries
                    return reply
                except BadReply as e:
                    why = f"malformed 200 reply: {e}"
                    self.emit("error", where="api", kind="malformed_reply", status=status, message=why,
                              body_head=data[:200].decode("utf-8", "replace"), step=step)
            if attempt == self.max_retries:
                msg = f"gave up after {attempt + 1} attempt(s); the last: {why}"
                self.emit("error", where="api", kind="retries_exhausted", status=status, message=msg, step=step)
                raise ApiFailure(msg, status)
            wait = retry_wait(headers, attempt)
            left = time_left()
            if left is not None and wait > left:
                msg = f"{why}; the retry wait ({wait:.1f} s) is longer than the wall-time budget left ({left:.1f} s)"
                self.emit("error", where="api", kind="no_time_to_retry", status=status, message=msg, step=step)
                raise ApiFailure(msg, status, out_of_time=True)
            self.emit("retry", step=step, attempt=attempt + 1, of=self.max_retries, status=status, reason=why,
                      wait_s=round(wait, 3))
            retries.append(why)
            self.sleep(wait)
        raise AssertionError("unreachable")
