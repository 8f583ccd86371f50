"""What a person's messages are: phrased as a question or not; naming attention concepts or CUDA constructs.

The paper reports that of 63 interrogative human messages "only 17 mentioned an attention concept
and none prescribed a CUDA construct". These are the two vocabularies that claim is counted with:
keyword rules over the message text (whole words, case-insensitive), good for a first count, not a
substitute for labels. A message event's own `attention_concept` / `cuda_construct` (true/false)
wins over the rules. A CUDA construct named in a question is counted as *mentioned*; whether the
question *prescribes* it is a judgement the rules cannot make, so the count is an upper bound on
the paper's "prescribed".
"""
from __future__ import annotations

import re

# the attention operator's own ideas (not GPU programming): what a question about *attention* names
ATTENTION = [
    r"attention", r"softmax", r"online softmax", r"log-?sum-?exp", r"lse", r"q\s*k\^?t?", r"qk", r"query",
    r"queries", r"kv", r"kv[- ]cache", r"paged kv", r"split[- ]kv", r"causal", r"mask(ing|s)?",
    r"sliding[- ]windows?", r"local attention", r"head[- ]?dim(ension)?s?", r"hd\d+", r"attention heads?",
    r"gqa", r"mqa", r"grouped[- ]query", r"decode", r"prefill", r"sinks?", r"left[- ]pad(ding)?", r"softcap(ped|ping)?",
    r"rotary", r"rope", r"varlen", r"sequence length", r"seqlen", r"alibi", r"dropout",
]
# GPU programming constructs a question could prescribe
CUDA = [
    r"wgmma", r"mma(\.sync)?", r"hmma", r"tensor cores?", r"tma", r"cp\.async(\.bulk)?", r"mbarriers?", r"ldmatrix",
    r"stmatrix", r"__shfl\w*", r"shfl", r"warp shuffles?", r"warp[- ]speciali[sz](ed|ation)", r"warpgroups?",
    r"shared memory", r"smem", r"registers?", r"__syncthreads", r"__launch_bounds__", r"launch bounds", r"clusters?",
    r"dsmem", r"persistent kernel", r"swizzl(e|ing)", r"double[- ]buffer(ing)?", r"pipelin(e|ing)", r"unroll(ing)?",
    r"vectori[sz](e|ed)", r"128-bit loads?", r"exp2", r"ex2", r"fp8 mma", r"tcgen05", r"tmem",
]
_WH = re.compile(r"^\s*(what|why|how|where|when|which|who|whose|is|are|was|were|does|do|did|can|could|"
                 r"should|would|will|have|has|had|isn't|aren't|doesn't|shouldn't)\b", re.I)
_ATT = re.compile(r"\b(" + "|".join(ATTENTION) + r")\b", re.I)
_CUDA = re.compile(r"(?<![\w.])(" + "|".join(CUDA) + r")(?![\w])", re.I)


def interrogative(text: str) -> bool:
    """Phrased as a question: a question mark, or opening with a question word."""
    return "?" in text or bool(_WH.match(text))


def attention_terms(text: str) -> list[str]:
    """The attention concepts a text names, lower-cased, in order of appearance."""
    return [m.group(0).lower() for m in _ATT.finditer(text or "")]


def cuda_terms(text: str) -> list[str]:
    """The CUDA constructs a text names, lower-cased, in order of appearance."""
    return [m.group(0).lower() for m in _CUDA.finditer(text or "")]


def names_attention(text: str, label=None) -> bool:
    return bool(label) if label is not None else bool(attention_terms(text))


def names_cuda(text: str, label=None) -> bool:
    return bool(label) if label is not None else bool(cuda_terms(text))
