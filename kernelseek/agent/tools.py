"""The agent's tools: shell, read, write, edit (exact replacement) and evaluate (the harness).

`TOOLS` are the Messages API tool definitions; `Toolbox.call(name, input, call_id, time_left)` runs
one and returns (text, is_error, file with the full text or None): the arguments are checked
against the tool's input_schema first (a bad one is an error result, never an exception), no tool
runs past the wall-time budget left, and the text is bounded (context.bound_output). Files live in
the workspace (sandbox.Sandbox). `evaluate` saves the kernel as versions/<sha256>.cu
(versions/<sha256>/ for a kernel with local headers or a folder), runs the campaign's evaluator into
evals/<n>/ (confined when the sandbox is: the candidate's build and worker under bubblewrap),
records the results' digest for the ledger (the loop writes it into the trace's `evaluation`
event; store judges only evaluations recorded there), and returns the results table and summary
with the goal verdict; `restore` puts any evaluated version back.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import ledger
from .. import results as R
from ..goal import judge_run, load_goal, sha256_file
from ..store import RESULTS, is_run, read_meta
from .config import Config, Paths
from .context import bound_output
from .sandbox import Sandbox, SandboxError, scrubbed_environ

TOOLS = [
    {"name": "shell", "description": "Run a bash command in the workspace (the current directory). "
     "Output (stdout and stderr) is capped; the command is killed at its timeout.",
     "input_schema": {"type": "object", "properties": {
         "command": {"type": "string"},
         "timeout_s": {"type": "number", "description": "seconds before the command is killed"}},
         "required": ["command"]}},
    {"name": "read", "description": "Read a text file in the workspace, with line numbers.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"},
         "offset": {"type": "integer", "description": "first line (1-based)"},
         "limit": {"type": "integer", "description": "number of lines"}},
         "required": ["path"]}},
    {"name": "write", "description": "Create or overwrite a file in the workspace.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}},
    {"name": "edit", "description": "Replace an exact string in a workspace file. `old` must occur "
     "exactly once unless replace_all is true.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"},
         "replace_all": {"type": "boolean"}}, "required": ["path", "old", "new"]}},
    {"name": "evaluate", "description": "Build the kernel, check it on every scenario of the grid "
     "against the references and time it against the baseline; returns the results table, the "
     "summary and the goal verdict. `scenarios` restricts it to some rows (such a partial run "
     "never meets the goal).",
     "input_schema": {"type": "object", "properties": {
         "scenarios": {"type": "string", "description": "filter: names, substrings, rows (3,20-24)"},
         "check_only": {"type": "boolean", "description": "check correctness only, no timing"}}}},
]


SCHEMAS = {t["name"]: t["input_schema"] for t in TOOLS}
_NUM = {"integer": int, "number": float}


def check_args(name: str, args) -> tuple[dict, str | None]:
    """The tool's arguments checked against its input_schema: (arguments, None) or ({}, what is
    wrong, naming the field). A number given as a numeric string ("10") is taken as the number."""
    if not isinstance(args, dict):
        return {}, f"the input must be an object, got {type(args).__name__}"
    schema = SCHEMAS[name]
    props = schema.get("properties", {})
    missing = [k for k in schema.get("required", []) if k not in args]
    if missing:
        return {}, f"missing required field(s) {', '.join(missing)}"
    unknown = sorted(set(args) - set(props))
    if unknown:
        return {}, f"unknown field(s) {', '.join(unknown)} (known: {', '.join(props)})"
    out = {}
    for k, v in args.items():
        want = props[k].get("type")
        if v is None and k not in schema.get("required", []):
            continue
        if want in _NUM:
            if isinstance(v, str):
                try:
                    v = _NUM[want](v.strip())
                except ValueError:
                    return {}, f"field '{k}' must be {_article(want)}, got {v!r}"
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (want == "integer" and v != int(v)):
                return {}, f"field '{k}' must be {_article(want)}, got {v!r}"
            v = _NUM[want](v)
        elif want == "string" and not isinstance(v, str):
            return {}, f"field '{k}' must be a string, got {type(v).__name__}"
        elif want == "boolean" and not isinstance(v, bool):
            return {}, f"field '{k}' must be true or false, got {v!r}"
        out[k] = v
    return out, None


def _article(t: str) -> str:
    return "an integer" if t == "integer" else "a number"


@dataclass
class EvalRecord:
    n: int
    dir: Path
    sha: str
    rows: list
    meta: dict
    filtered: bool
    check_only: bool
    seconds: float
    verdict: object = None        # goal.Verdict for a full, timed evaluation
    results_sha256: str = ""      # the ledger's digest of evals/<n>/results.json (kernelseek.ledger)

    def event(self, root: Path) -> dict:
        s = R.summarize(self.rows)
        return {"n": self.n, "dir": os.path.relpath(self.dir, root), "kernel_sha256": self.sha,
                ledger.DIGEST: self.results_sha256,
                "summary": s, "geomean": s["geomean_speedup"], "filtered": self.filtered,
                "check_only": self.check_only, "seconds": round(self.seconds, 3),
                "replayed_from": self.meta.get("replayed_from"),
                "met": getattr(self.verdict, "met", None)}


class Toolbox:
    """Runs tool calls for one campaign."""

    def __init__(self, cfg: Config, paths: Paths, sandbox: Sandbox, evaluator):
        self.cfg, self.paths, self.sb, self.evaluator = cfg, paths, sandbox, evaluator
        self.goal = load_goal(paths.goal if paths.goal.is_file() else cfg.goal)
        self.last_eval: EvalRecord | None = None

    @property
    def kernel(self) -> Path:
        return self.paths.workspace / self.cfg.kernel_name

    def call(self, name: str, args, call_id: str = "call", time_left: float | None = None) -> tuple[str, bool, str | None]:
        """(text the model sees, is_error, workspace file with the full text when it was cut).
        `time_left`: seconds of wall-time budget left; no tool is given longer."""
        fn = getattr(self, f"_{name}", None)
        if name not in SCHEMAS or fn is None:
            return f"unknown tool {name!r}; tools: {', '.join(t['name'] for t in TOOLS)}", True, None
        args, bad = check_args(name, args)
        if bad:
            return f"bad arguments for {name}: {bad}", True, None
        self.time_left = time_left
        try:
            text, err = fn(**args)
        except SandboxError as e:
            return f"refused: {e}", True, None
        except (OSError, UnicodeDecodeError) as e:
            return f"{name} failed: {e}", True, None
        except Exception as e:  # a tool's own bug must not end the campaign: the agent and the trace see it
            return f"{name} failed with an internal error: {type(e).__name__}: {e}", True, None
        source = args.get("path") if name == "read" else None
        shown, full = bound_output(text, self.cfg.output_cap, self.paths.workspace,
                                   f"{name}-{re.sub(r'[^A-Za-z0-9_.-]', '_', str(call_id))[-48:]}", source)
        return shown, err, full

    def _limit(self, limit: float | None) -> float | None:
        """A tool's time limit, never past the wall-time budget left."""
        left = getattr(self, "time_left", None)
        if left is None:
            return limit
        return max(1.0, left) if limit is None else max(1.0, min(limit, left))

    # ---- tools ---------------------------------------------------------------------------------
    def _shell(self, command: str, timeout_s: float | None = None):
        r = self.sb.run(command, self._limit(timeout_s if timeout_s is not None else self.cfg.shell_timeout_s))
        return r.text(), bool(r.timed_out or r.returncode)

    def _read(self, path: str, offset: int = 1, limit: int | None = None):
        p = self.sb.path(path)
        lines = p.read_text().splitlines()
        lo = max(1, int(offset or 1))
        hi = len(lines) if limit is None else min(len(lines), lo - 1 + int(limit))
        body = "\n".join(f"{i:6}\t{lines[i - 1]}" for i in range(lo, hi + 1))
        return (body or f"({self.sb.rel(p)}: no lines in {lo}..{hi}; the file has {len(lines)})"), False

    def _write(self, path: str, content: str):
        p = self.sb.path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        return f"wrote {self.sb.rel(p)} ({len(content.splitlines())} lines)", False

    def _edit(self, path: str, old: str, new: str, replace_all: bool = False):
        p = self.sb.path(path)
        text = p.read_text()
        k = text.count(old) if old else 0
        if k == 0:
            return f"edit refused: the old text does not occur in {self.sb.rel(p)}", True
        if k > 1 and not replace_all:
            return (f"edit refused: the old text occurs {k} times in {self.sb.rel(p)}; give more context "
                    "or set replace_all"), True
        p.write_text(text.replace(old, new) if replace_all else text.replace(old, new, 1))
        return f"edited {self.sb.rel(p)} ({k if replace_all else 1} replacement(s))", False

    def _evaluate(self, scenarios: str | None = None, check_only: bool = False):
        rec = self.evaluate(scenarios, bool(check_only))
        if isinstance(rec, str):
            return rec, True
        text = R.format_table(rec.rows)
        kept = version_path(self.paths, rec.sha, self.cfg.kernel_name).relative_to(self.paths.root)
        text += f"\nevaluation {rec.n} (evals/{rec.n}); kernel version {rec.sha[:12]} kept as {kept}"
        if rec.verdict is not None:
            text += "\n" + ("goal: MET" if rec.verdict.met else "goal: not met: " + rec.verdict.shortfall())
        else:
            text += "\ngoal: not judged (a partial or check-only run never meets the goal)"
        return text, False

    # ---- the harness ---------------------------------------------------------------------------
    def evaluate(self, scenarios: str | None = None, check_only: bool = False) -> EvalRecord | str:
        """Keep the kernel version, run the evaluator into evals/<n>/, judge full runs."""
        from ..scenarios import GridError
        if not self.kernel.exists():
            return f"the kernel {self.cfg.kernel_name} is missing from the workspace"
        outside = self.outside_workspace()
        if outside:
            return (f"evaluation refused: the kernel reaches {outside}, outside the workspace (a link or an "
                    "#include); nothing was kept or built")
        sha = save_version(self.paths, self.kernel)
        evals = self.paths.evals
        evals.mkdir(exist_ok=True)
        n = self.paths.next_eval_number()
        filt = scenarios or self.cfg.scenarios
        t0 = time.monotonic()
        try:
            with scrubbed_environ():
                run, rows, meta = self.evaluator(
                    str(self.kernel), self.cfg.grid, self.cfg.baseline, filt, check_only, self.cfg.seed,
                    self._limit(self.cfg.eval_timeout_s), self.cfg.eval_budget_s, runs_dir=str(evals), progress=False,
                    confine=self.sb.confined, command=f"kernelseek eval {self.cfg.kernel_name} --grid {self.cfg.grid} "
                            f"--baseline {self.cfg.baseline}" + (f" --scenarios {filt}" if filt else ""))
        except (GridError, FileNotFoundError, ValueError) as e:
            return f"evaluation could not run: {e}"
        dest = self.paths.eval_dir(n)
        os.replace(run, dest)
        full = not check_only and (scenarios is None or scenarios == self.cfg.scenarios)
        verdict = judge_run(dest, self.goal, kernel=self.kernel) if full else None
        rec = EvalRecord(n, dest, sha, rows, meta, scenarios is not None, check_only,
                         time.monotonic() - t0, verdict, ledger.digest(Path(dest) / RESULTS))   # (evals are never packed)
        self.last_eval = rec
        return rec

    def outside_workspace(self) -> str | None:
        """The first file of the kernel (the entry, through links, and what it includes) that lies
        outside the workspace, or None. This process is not confined: it must not copy into versions/
        (or hash, or build) a file the agent named by a link, such as /proc/<loop>/environ."""
        from ..kernel_source import closure, entry_file
        try:
            for f in [self.kernel.resolve(), *closure(entry_file(self.kernel))]:
                try:
                    self.sb.path(str(f))
                except SandboxError:
                    return str(f)
        except (OSError, ValueError) as e:
            return f"an unreadable file ({e})"
        return None

    def verdict(self):
        """The goal verdict on the latest full evaluation the loop recorded in the ledger (stale if the
        kernel changed since): Paths.eval_dirs() lists only those (store, kernelseek.ledger)."""
        for d in reversed(self.paths.eval_dirs()):
            meta = read_meta(d)
            if not meta.get("check_only") and meta.get("scenarios_filter") == self.cfg.scenarios:
                return judge_run(d, self.goal, kernel=self.kernel)
        return None


def save_version(paths: Paths, kernel: Path) -> str:
    """Keep the kernel, content-addressed by its hash (returned): a lone file as versions/<sha256>.cu,
    a kernel with local headers or a folder as versions/<sha256>/ (laid out as in the workspace)."""
    from ..kernel_source import copy_kernel, is_lone_file
    sha = sha256_file(kernel)
    paths.versions.mkdir(exist_ok=True)
    if is_lone_file(kernel):
        if not paths.version_file(sha).exists():
            shutil.copyfile(kernel, paths.version_file(sha))
    elif not paths.version_dir(sha).exists():
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{sha[:12]}-", dir=paths.versions))
        copy_kernel(kernel, tmp)
        os.replace(tmp, paths.version_dir(sha))
    return sha


def version_path(paths: Paths, sha: str, kernel_name: str) -> Path:
    """A kept version, as the harness builds it: versions/<sha>.cu, or the kernel in versions/<sha>/."""
    return paths.version_path(sha, kernel_name)


def restore(root, ref: str, kernel_name: str | None = None) -> Path:
    """Put a kept version back into the workspace: `ref` is an evaluation number or a hash prefix.
    A lone file goes to workspace/<kernel_name> (default the campaign's); a kept folder is copied
    over the workspace as it was laid out there."""
    from .config import load
    cfg, paths = load(root)
    if ref.isdigit() and is_run(paths.eval_dir(ref), packed=False):
        sha = read_meta(paths.eval_dir(ref))["kernel_sha256"]
    else:
        hits = paths.version_hashes(ref)
        if len(hits) != 1:
            raise FileNotFoundError(f"{ref}: {'no' if not hits else len(hits)} kept versions match")
        sha = hits[0]
    src = version_path(paths, sha, cfg.kernel_name)
    if not src.exists():
        raise FileNotFoundError(f"{src}: version not kept")
    if src.parent == paths.versions:           # a lone file
        dest = paths.workspace / (kernel_name or cfg.kernel_name)
        shutil.copyfile(src, dest)
        return dest
    shutil.copytree(paths.version_dir(sha), paths.workspace, dirs_exist_ok=True)
    return paths.workspace / cfg.kernel_name
