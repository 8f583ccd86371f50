"""Baselines: adapters that say whether they are available and which scenarios they compute.

Every adapter computes the scenario's attention in its own native layout and returns the output
in the kernel's layout for the check (a wrong baseline is not a bar). `bind(s, inp)` returns a
zero-argument callable for timing and a `result(raw)` converter. `choose(names, s)` lists the
adapters to try for a scenario; `--baseline best` times them all and keeps the fastest that passed.

Adapters: cudnn and fa2 (PyTorch SDPA backends), flash_op (PyTorch's internal FlashAttention-2 op,
varlen and window), flex (FlexAttention compiled per shape), fa4 (flash_attn.cute), fa3
(vLLM's prebuilt FA3 library, or a verified flash_attn_interface), flashinfer (paged decode, paged,
dense and varlen prefill through FlashInfer's wrappers), original (another kernel file through the ABI).
Nothing falls back silently: an adapter that cannot run a scenario declines it with a reason.

Modules: base (Baseline, Bound, common_limits), torch_native (SDPA backends, flash_op, the dense
stand-in), flex, flash_attn (FA4, FA3), fa3_vllm, flashinfer, original (a kernel file through kernelseek.abi), registry
(the names, `get`, `choose`, `best`'s order, `stand_in_for`).
"""
from __future__ import annotations

from .base import Baseline, Bound, common_limits
from .flash_attn import FA3, FA4
from .flashinfer import FlashInfer
from .flex import Flex
from .original import Original
from .registry import BEST_ORDER, REGISTRY, choose, choose_why, get, stand_in_for
from .torch_native import FlashOp, Sdpa, SdpaDenseStandIn

__all__ = ["BEST_ORDER", "REGISTRY", "Baseline", "Bound", "FA3", "FA4", "FlashInfer", "FlashOp", "Flex", "Original", "Sdpa",
           "SdpaDenseStandIn", "choose", "choose_why", "common_limits", "get", "stand_in_for"]
