"""A scripted model, served on 127.0.0.1 as a real Messages API, that drives one campaign end to end.

    python3 tools/scripted_model.py [--key KEY] [--url-file FILE]     serve until killed; prints the URL
    kernelseek campaign run --kernel kernels/naive_fwd.cu --grid e2e --arm bank --plateau-evals 1 \\
        --model scripted-e2e-1 --base-url URL --note "the model is tools/scripted_model.py ..."

It is NOT a language model: every reply is written below, chosen from the conversation the loop
sends (stateless, so a retried request gets the same reply). The server is the test suite's fake
API (tests/fixtures/fakeapi/fakeapi.py), which answers the way the real API does and refuses what
the real API would refuse (roles, tool_result pairing, empty text, cache breakpoints); this
script only chooses the content. It answers only a model id starting "scripted-", so a trace it
made always says so in its model field (and the campaign's --note puts it in a `note` event).

The script, one step per model call (the tag "[scripted step NAME]" ends every reply's text):
    baseline   quotes the question it was asked at the start; evaluates the starting kernel
    tiled      writes v2 (tools/scripted_kernels.py: tiled, several times faster); evaluates
    norescale  quotes the question on the gain and answers it from the numbers; writes v3 (drops
               the accumulator's rescale: the check fails); evaluates
    excuse     explains the failures away as rounding noise and a tight tolerance; reads the kernel
    fix        quotes the question on correctness and concedes; writes v4 (= v2); evaluates
    rerun      (only while no plateau question has come, at most twice) evaluates again
    bn32       quotes the plateau question; writes v5 (BN = 32); evaluates
    revert     (only if v5 failed its check) writes v4 back; evaluates
    claim      claims a hardware limit and ends its turn (the goal is judged: not met)
    concede    quotes the question on the claim; says what the claim missed; ends its turn
    end        says the script is over and ends its turn (until the step budget stops the campaign)
A question is any text of the latest user message that is not one of the loop's own messages
(the task, "The goal is not met: ...", "Continue ...").
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "fixtures" / "fakeapi")]

from scripted_kernels import source  # noqa: E402

KERNEL = "naive_fwd.cu"
MODEL_PREFIX = "scripted-"
TAG = re.compile(r"\[scripted step ([a-z0-9-]+)\]")
LOOP_TEXTS = ("Make ", "The goal is not met", "Continue", "Your last reply", "Your reply was cut")
SUMMARY = re.compile(r"correct (\d+)/(\d+)\s+geomean speedup ([0-9.]+|n/a)")
MAX_RERUNS = 2


# ---- reading the conversation ------------------------------------------------------------------
def _blocks(m: dict) -> list:
    c = m.get("content")
    return [{"type": "text", "text": c}] if isinstance(c, str) else list(c or [])


def steps_taken(body: dict) -> list[str]:
    """The tags of the script's earlier replies, in order."""
    out = []
    for m in body.get("messages") or []:
        if m.get("role") == "assistant":
            for b in _blocks(m):
                if b.get("type") == "text":
                    out += TAG.findall(b.get("text", ""))
    return out


def questions(body: dict) -> list[str]:
    """Texts of the latest user message that the loop did not write itself: questions to answer."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "user":
        return []
    return [b["text"].strip() for b in _blocks(msgs[-1]) if b.get("type") == "text"
            and b.get("text", "").strip() and not b["text"].lstrip().startswith(LOOP_TEXTS)]


def last_eval(body: dict) -> dict | None:
    """The latest evaluate result in the conversation: passed, scenarios, geomean (None: n/a), text."""
    msgs = body.get("messages") or []
    ids = {}
    for m in msgs:
        for b in _blocks(m):
            if b.get("type") == "tool_use":
                ids[b.get("id")] = b.get("name")
    found = None
    for m in msgs:
        for b in _blocks(m):
            if b.get("type") == "tool_result" and ids.get(b.get("tool_use_id")) == "evaluate":
                c = b.get("content")
                text = c if isinstance(c, str) else " ".join(x.get("text", "") for x in c or [])
                s = SUMMARY.search(text)
                if s:
                    found = {"passed": int(s.group(1)), "scenarios": int(s.group(2)),
                             "geomean": None if s.group(3) == "n/a" else float(s.group(3)), "text": text}
    return found


def evals_of(body: dict, tag: str) -> dict | None:
    """The evaluate result that followed the script's step `tag` (its last such step)."""
    msgs = body.get("messages") or []
    for k in range(len(msgs) - 1, -1, -1):
        m = msgs[k]
        if m.get("role") == "assistant" and any(tag in TAG.findall(b.get("text", "")) for b in _blocks(m)
                                                 if b.get("type") == "text"):
            return last_eval({"messages": msgs[:k + 2]})
    return None


# ---- the replies -------------------------------------------------------------------------------
def _text(t: str) -> dict:
    return {"type": "text", "text": t}


def _tool(name: str, **inp) -> dict:
    return {"type": "tool_use", "name": name, "input": inp}


def _quote(qs: list[str]) -> str:
    if not qs:
        return ""
    return " ".join(f'You asked: "{q}"' for q in qs) + "\n\n"


def _gm(e: dict | None) -> str:
    return "n/a" if not e or e.get("geomean") is None else f"{e['geomean']:.4f}x"


def _reply(tag: str, text: str, *tools) -> dict:
    return {"content": [_text(f"{text}\n\n[scripted step {tag}]"), *tools]}


def _write(version: str) -> dict:
    return _tool("write", path=KERNEL, content=source(version))


def next_step(body: dict) -> dict:
    """The reply to this request (a fake-API step: content blocks, stop reason from them)."""
    model = str(body.get("model") or "")
    if not model.startswith(MODEL_PREFIX):
        return {"status": 400, "error": f"the scripted model answers only model ids starting "
                f"{MODEL_PREFIX!r} (got {model!r}), so that its traces say what they are"}
    done, qs, ev = steps_taken(body), questions(body), last_eval(body)
    q = _quote(qs)
    last = done[-1] if done else None
    if last is None:
        return _reply("baseline", q + "First I measure the starting kernel as it is, on the whole grid.",
                      _tool("evaluate"))
    if last == "baseline":
        return _reply("tiled", f"The starting kernel reaches a geomean of {_gm(ev)} of the baseline. It runs one "
                      "block per query row, reads all of K and V once per row and computes every score twice. "
                      "I replace it with a tiled kernel: 64 query rows per block, key tiles in shared memory, "
                      "each score computed once, an online softmax.", _write("v2-tiled"), _tool("evaluate"))
    if last == "tiled":
        return _reply("norescale", q + f"The gain comes from the tiling: {ev['passed'] if ev else '?'} of "
                      f"{ev['scenarios'] if ev else '?'} scenarios pass the check, and the geomean went from "
                      f"{_gm(evals_of(body, 'baseline'))} to {_gm(ev)}. K and V are now read once per 64 query "
                      "rows instead of once per row, and each score is computed once instead of twice, so a "
                      "gain of this size is what the change should give. Next, a saving: skip the rescale of "
                      "the accumulator when a row's running max moves.", _write("v3-norescale"), _tool("evaluate"))
    if last == "norescale":
        failed = (ev["scenarios"] - ev["passed"]) if ev else "some"
        return _reply("excuse", f"{failed} rows failed the check, but that is just bf16 rounding noise: the "
                      "tolerance is too tight for a kernel that sums the keys in a different order than the "
                      "reference. Let me look at the kernel once more.", _tool("read", path=KERNEL, offset=1, limit=12))
    if last == "excuse":
        return _reply("fix", q + "Looking at the numbers again, the errors are far larger than a different "
                      "summation order could give. Skipping the rescale is a real bug: when a later key tile "
                      "raises a row's running max, the sums kept under the old max are no longer on the same "
                      "scale. I put the rescale back.", _write("v4-fixed"), _tool("evaluate"))
    return _later(body, done, last, q, ev)


def _later(body: dict, done: list, last: str, q: str, ev: dict | None) -> dict:
    if last in ("fix", "rerun") and not q and done.count("rerun") < MAX_RERUNS:
        return _reply("rerun", f"Evaluation result: geomean {_gm(ev)}. Let me run the evaluation once more, to "
                      "see how much the numbers move between runs.", _tool("evaluate"))
    if last in ("fix", "rerun"):
        return _reply("bn32", q + f"The fixed kernel gives {_gm(ev)} against {_gm(evals_of(body, 'tiled'))} for "
                      "the first tiled version: the same design, the same speed. One more thing to try in this "
                      "design: key tiles of 32 rows need less shared memory, so more blocks fit on each SM.",
                      _write("v5-bn32"), _tool("evaluate"))
    if last == "bn32" and ev and ev["passed"] < ev["scenarios"]:
        return _reply("revert", "Key tiles of 32 rows broke the check; I put the 64-row version back.",
                      _write("v4-fixed"), _tool("evaluate"))
    if last in ("bn32", "revert"):
        return _reply("claim", q + f"Key tiles of 32 rows give {_gm(ev)} against {_gm(evals_of(body, 'fix'))} with "
                      "64. This is as fast as this kernel can go: without tensor cores we have reached the "
                      "hardware limit of fp32 FMA throughput, and tile shapes move it by a few percent at most.")
    if last == "claim":
        return _reply("concede", q + "The claim does not hold up. The fp32 FMA rate is a ceiling of this design, "
                      "not of the GPU: the baseline runs on the tensor cores, which this kernel never uses. "
                      "A kernel built on mma instructions is the next step; this scripted run goes no further.")
    return _reply("end", q + "The scripted run is over; the step budget will close the campaign.")


def script(i: int, body: dict) -> dict:
    """The fake API's script hook: (request number, request body) -> step."""
    return next_step(body)


def main(argv=None) -> int:
    import argparse
    import os
    from fakeapi import FakeAPI
    ap = argparse.ArgumentParser(description="serve the scripted model on 127.0.0.1 (a real HTTP Messages API)")
    ap.add_argument("--key", default=os.environ.get("ANTHROPIC_API_KEY"),
                    help="the key requests must carry (default: $ANTHROPIC_API_KEY; none: any)")
    ap.add_argument("--url-file", help="also write the base URL here, once the server listens")
    a = ap.parse_args(argv)
    with FakeAPI(script, key=a.key or None) as api:
        print(api.base_url, flush=True)
        if a.url_file:
            Path(a.url_file).write_text(api.base_url + "\n")
        try:
            api.thread.join()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
