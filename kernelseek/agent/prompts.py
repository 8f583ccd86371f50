"""The words the loop says to the model: the system prompt, the task, the shortfall.

The system prompt states the goal and the harness command and nothing about who else takes part
in the campaign (no arm, no questioner, no person): every arm gets the same one.
"""
from __future__ import annotations

from ..goal import Goal


def describe_goal(g: Goal) -> str:
    """The goal in one paragraph, every override spelled out."""
    parts = [f"every scenario of the grid passes its correctness check and reaches at least "
             f"{g.min_speedup:g}x the baseline's speed",
             f"the geometric-mean speedup over the scenarios reaches {g.geomean:g}x"]
    if g.by_group:
        parts.append("with these minimums for feature groups (first match wins): "
                     + ", ".join(f"{k}: {v:g}x" for k, v in g.by_group.items()))
    if g.by_scenario:
        parts.append("and for these scenarios: " + ", ".join(f"{k}: {v:g}x" for k, v in g.by_scenario.items()))
    return "; ".join(parts) + "."


def harness_command(kernel_name: str, grid: str, baseline: str, scenarios: str | None = None) -> str:
    return (f"kernelseek eval {kernel_name} --grid {grid} --baseline {baseline}"
            + (f" --scenarios {scenarios}" if scenarios else ""))


def system_prompt(kernel_name: str, grid: str, baseline: str, goal: Goal, scenarios: str | None = None) -> str:
    cmd = harness_command(kernel_name, grid, baseline, scenarios)
    return f"""You are making an existing CUDA kernel faster without making it wrong.

The kernel is {kernel_name} in your workspace (your current directory); it implements the interface \
declared in kseek.h. The shell, read, write and edit tools work inside the workspace.

The harness: the `evaluate` tool runs `{cmd}` on the current {kernel_name}. It builds the kernel, \
refuses it if the binary uses CUTLASS, CuTe, cuBLAS or cuDNN, checks its output against a reference \
and an fp32 reference on every scenario, times it against the baseline on the same GPU, and returns \
the results table, the summary and the goal verdict.

The goal: {describe_goal(goal)} It is judged on a full evaluation of the current kernel; results of \
an older version of the file do not count. When you end your turn the goal is checked; if it is not \
met you will be told what is missing and the work goes on."""


def task_message(kernel_name: str, grid: str, baseline: str) -> str:
    return (f"Make {kernel_name} faster than the baseline ({baseline}) on every scenario of the "
            f"{grid} grid, keeping it correct, until the goal is met.")


def shortfall_message(shortfall: str) -> str:
    return " ".join(f"The goal is not met: {shortfall}. Keep working.".split())


def no_results_message() -> str:
    return ("The goal is not met: there is no full evaluation of the current kernel. Run `evaluate` "
            "(without a scenario filter) on it. Keep working.")


def continue_message() -> str:
    return "Your reply was cut at the output limit. Continue."


def go_on_message() -> str:
    return "Continue with the task."


def empty_reply_message() -> str:
    return ("Your last reply was empty (no text and no tool call). Go on with the task: call a tool, or "
            "say in words what you found and what you will do next.")


def refusal_message() -> str:
    return ("Your last reply stopped with stop_reason refusal and was left out of the conversation. The "
            "task is to make a CUDA attention kernel faster in your workspace; go on with it.")


def truncated_call_message(max_tokens: int) -> str:
    return (f"not run: your reply reached the output limit ({max_tokens} tokens) inside this tool call, "
            "so its input may be incomplete. Send it again, shorter (for a long file: write it in parts, "
            "or use edit).")
