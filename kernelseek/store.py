"""Run and campaign folders: the one module that knows their layout and spells their file names.

    runs/<id>/                     a Run: one evaluation (kernelseek.evaluate writes it)
      results.json                 {"meta": {...}, "rows": [{...}, ...], "summary": {...}}: the record
      results.json.gz              instead of results.json in a committed run (data/runs): the same bytes gzipped
      results.parquet              the rows for pandas (a convenience copy; may be absent)
      meta.json                    the meta again, alone (written when the evaluation ends)
      build/                       log.txt, ptxas.json: the build of the evaluated kernel
      worker.log                   the worker's stderr
      notebooks/                   executed report notebooks (kernelseek report)
    campaigns/<id>/                a Campaign
      config.json  goal.yaml       its configuration (kernelseek.agent.config) and goal
      trace.jsonl  inbox.jsonl     events and waiting questions, append-only
      workspace/                   the agent's files; nothing there is ever read as a result
      versions/<sha256>.cu         every kernel version evaluated (versions/<sha256>/ for a kernel
                                   with local headers or a kernel folder)
      evals/<n>/                   its evaluations, Run folders numbered from 0 in order; only those
                                   the loop recorded in trace.jsonl's ledger count (kernelseek.ledger)
      notebooks/                   executed notebooks
      lock                         who runs its loop now (pid, host, start; agent/lock.py); empty
                                   when no loop runs
    the workspace's .kseek/outputs/ holds the full text of tool outputs cut for the model

Rows are plain dicts here: kernelseek.results owns the row schema and the summary and reads and
writes results through this module (the layering paths -> store -> results keeps imports acyclic).
Errors name the file and the field at fault. Runs and campaigns are append-only: nothing here
deletes a run, and results.json is replaced atomically so a reader never sees half a file.
"""
from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from . import ledger

# ---- file names: spelled here and nowhere else ------------------------------------------------
RESULTS = "results.json"
RESULTS_GZ = RESULTS + ".gz"        # the same document gzipped: committed runs (data/runs, tools/pack_runs.py)
MAX_UNPACKED = 1 << 30              # bytes a results.json.gz may unpack to (the largest run: ~0.4 MB)
RESULTS_PARQUET = "results.parquet"
META = "meta.json"
BUILD = "build"
BUILD_LOG = "log.txt"               # in build/: nvcc's command line and output
BUILD_PTXAS = "ptxas.json"          # in build/: the parsed ptxas report (registers, spills, smem)
WORKER_LOG = "worker.log"
PEERS = "peers.md"                  # `kernelseek peers`: the markdown peer table of the run
BASELINE_WORKER_LOG = "worker_baseline.log"   # the trusted worker that times the baselines
NOTEBOOKS = "notebooks"
CONFIG = "config.json"
GOAL = "goal.yaml"
TRACE = "trace.jsonl"
INBOX = "inbox.jsonl"
WORKSPACE = "workspace"
VERSIONS = "versions"
EVALS = "evals"
LOCK = "lock"
TOOL_OUTPUTS = ".kseek/outputs"     # in the workspace: full text of tool outputs the model saw cut
FILE_NAMES = (RESULTS, RESULTS_GZ, RESULTS_PARQUET, META, BUILD, WORKER_LOG, BASELINE_WORKER_LOG, NOTEBOOKS, CONFIG, GOAL, TRACE, INBOX,
              WORKSPACE, VERSIONS, EVALS, LOCK)


# ---- runs -------------------------------------------------------------------------------------
def results_file(path: str | Path) -> Path:
    """The results file of a run directory: results.json, or results.json.gz when only that one is
    there (a committed run; a plain file written beside it wins). A path to a file is returned as given."""
    p = Path(path)
    if not p.is_dir():
        packed = p.with_name(RESULTS_GZ)
        return packed if p.name == RESULTS and not p.is_file() and packed.is_file() else p
    return p / RESULTS_GZ if not (p / RESULTS).is_file() and (p / RESULTS_GZ).is_file() else p / RESULTS


def is_run(path: str | Path, packed: bool = True) -> bool:
    """Whether `path` is a run directory with its results written (plain, or gzipped when `packed`).
    A campaign's evaluations are never packed: its readers pass packed=False, so a results.json.gz
    that is not the harness's never counts there."""
    return (Path(path) / RESULTS).is_file() or (packed and (Path(path) / RESULTS_GZ).is_file())


def new_run_dir(root: str | Path = "runs", tag: str = "") -> Path:
    """runs/<UTC time>-<tag>[-n]; never reuses a directory (runs are append-only)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + (f"-{tag}" if tag else "")
    for i in range(1000):
        p = root / (base if i == 0 else f"{base}-{i}")
        try:
            p.mkdir()
            return p
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a new run directory under {root}")


def list_runs(root: str | Path) -> list[Path]:
    """Run directories directly under `root` (those with a results.json or results.json.gz), by name."""
    root = Path(root)
    return sorted({p.parent for n in (RESULTS, RESULTS_GZ) for p in root.glob(f"*/{n}")}) if root.is_dir() else []


def _jsonable(x):
    """numpy/torch scalars as numbers; anything else as its string (NaN floats are written as NaN)."""
    if hasattr(x, "item"):
        return x.item()
    return str(x)


def write_results(run_dir: str | Path, meta: dict, rows: list[dict], summary: dict) -> Path:
    """Write results.json atomically (a reader sees the old or the new file, never half of one)."""
    run_dir = Path(run_dir)
    doc = {"meta": meta, "rows": rows, "summary": summary}
    tmp = run_dir / (RESULTS + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=_jsonable))
    os.replace(tmp, run_dir / RESULTS)
    return run_dir / RESULTS


def _read_json(p: Path, what: str):
    try:
        if p.name.endswith(".gz"):
            with gzip.open(p, "rb") as f:
                raw = f.read(MAX_UNPACKED + 1)
            if len(raw) > MAX_UNPACKED:
                raise ValueError(f"{p}: unpacks to more than {MAX_UNPACKED >> 20} MiB: not a {what}")
        else:
            raw = p.read_bytes()
        return json.loads(raw.decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{p}: no {what}") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ValueError(f"{p}: not a readable gzip file ({e})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not UTF-8 text (byte {e.start}): not a {what}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None


def read_results(path: str | Path) -> dict:
    """The checked document of a run directory or results.json: meta, rows (dicts), summary."""
    p = results_file(path)
    doc = _read_json(p, "results file")
    if not isinstance(doc, dict) or "rows" not in doc:
        raise ValueError(f"{p}: field 'rows' missing: not a KernelSeek results file")
    if not isinstance(doc["rows"], list):
        raise ValueError(f"{p}: field 'rows' must be a list, got {type(doc['rows']).__name__}")
    for i, d in enumerate(doc["rows"]):
        if not isinstance(d, dict) or "scenario" not in d:
            raise ValueError(f"{p}: rows[{i}] has no field 'scenario'")
    for k in ("meta", "summary"):
        if not isinstance(doc.get(k, {}), dict):
            raise ValueError(f"{p}: field '{k}' must be an object, got {type(doc[k]).__name__}")
    return {"meta": doc.get("meta", {}), "rows": doc["rows"], "summary": doc.get("summary", {})}


def read_meta(path: str | Path) -> dict:
    """The meta of a run directory or results.json (the rows are not checked: listing stays cheap)."""
    p = results_file(path)
    doc = _read_json(p, "results file")
    meta = doc.get("meta", {}) if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        raise ValueError(f"{p}: field 'meta' must be an object")
    return meta


def pack_results(run_dir: str | Path) -> Path:
    """Replace a run's results.json by results.json.gz holding the same bytes (gzip level 9, no name or
    time in the header, so packing twice gives the same file), for committing runs: the tracked tree
    travels to the GPU machine with every call. The plain file is removed only after the packed one
    reads back equal. -> the packed file."""
    src, dst = Path(run_dir) / RESULTS, Path(run_dir) / RESULTS_GZ
    raw = src.read_bytes()
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    if gzip.decompress(tmp.read_bytes()) != raw:
        tmp.unlink()
        raise RuntimeError(f"{tmp}: the packed file does not read back as {src}")
    os.replace(tmp, dst)
    src.unlink()
    return dst


def peers_file(run_dir: str | Path) -> Path:
    """The run's peer table (kernelseek.peers writes it)."""
    return Path(run_dir) / PEERS


def write_meta(run_dir: str | Path, meta: dict) -> Path:
    """meta.json: the run's meta on its own, beside results.json."""
    p = Path(run_dir) / META
    p.write_text(json.dumps(meta, indent=1, default=_jsonable))
    return p


def write_build(run_dir: str | Path, log: str, ptxas: list) -> Path:
    """build/: the build log and the parsed ptxas report of the evaluated kernel."""
    d = Path(run_dir) / BUILD
    d.mkdir(exist_ok=True)
    (d / BUILD_LOG).write_text(log)
    (d / BUILD_PTXAS).write_text(json.dumps(ptxas, indent=1))
    return d


@dataclass
class Run:
    """One evaluation's folder and its record (rows as stored: dicts with at least 'scenario')."""
    path: Path
    meta: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    def __post_init__(self):
        self.path = Path(self.path)

    results_file = property(lambda s: results_file(s.path) if s.path.is_dir() else s.path / RESULTS)
    parquet_file = property(lambda s: s.path / RESULTS_PARQUET)
    meta_file = property(lambda s: s.path / META)
    build_dir = property(lambda s: s.path / BUILD)
    worker_log = property(lambda s: s.path / WORKER_LOG)
    baseline_worker_log = property(lambda s: s.path / BASELINE_WORKER_LOG)
    notebooks = property(lambda s: s.path / NOTEBOOKS)

    @classmethod
    def load(cls, path: str | Path) -> "Run":
        """From a run directory or its results.json; errors name the file and field."""
        p = results_file(path)
        doc = read_results(p)
        return cls(p.parent, doc["meta"], doc["rows"], doc["summary"])

    def save(self) -> Path:
        """Write results.json (atomically); returns its path."""
        self.path.mkdir(parents=True, exist_ok=True)
        return write_results(self.path, self.meta, self.rows, self.summary)


# ---- campaigns --------------------------------------------------------------------------------
def next_number(folder: str | Path) -> int:
    """The number the next run under `folder` gets: one past the highest numbered folder, finished
    or not (never the name of a folder already there, whatever appeared in it)."""
    folder = Path(folder)
    return max([int(d.name) for d in folder.iterdir() if d.name.isdigit()] + [-1]) + 1 if folder.is_dir() else 0


def numbered_runs(folder: str | Path) -> list[Path]:
    """Run directories named by a number directly under `folder`, in increasing number.

    The one rule for a campaign's evaluations (goal, triggers, triage, the console, the loop and
    the replay used slightly different ones): a folder counts when its name is a number and its
    results.json exists. A number because the loop numbers evaluations in the order it ran them,
    and that order is what "latest" and "in order" mean (triage also took other names, sorted last:
    nothing writes those, and a stray copy there is not one of the campaign's evaluations).
    results.json because an evaluation still running (or killed before its first row) has none
    yet and nothing to judge.
    """
    folder = Path(folder)
    ds = [d for d in folder.iterdir() if d.name.isdigit() and is_run(d, packed=False)] if folder.is_dir() else []
    return sorted(ds, key=lambda d: int(d.name))


@dataclass
class Campaign:
    """A campaign folder: where each of its parts lives, and its evaluations in order.

    The path is kept as given (kernelseek.agent.config.Paths makes it absolute for the loop)."""
    root: Path

    def __post_init__(self):
        self.root = Path(self.root)

    config = property(lambda s: s.root / CONFIG)
    goal = property(lambda s: s.root / GOAL)
    trace = property(lambda s: s.root / TRACE)
    inbox = property(lambda s: s.root / INBOX)
    workspace = property(lambda s: s.root / WORKSPACE)
    versions = property(lambda s: s.root / VERSIONS)
    evals = property(lambda s: s.root / EVALS)
    notebooks = property(lambda s: s.root / NOTEBOOKS)
    lock = property(lambda s: s.root / LOCK)

    def read_config(self) -> dict:
        """config.json as a dict; errors name the file (the fields are checked by agent.config)."""
        doc = _read_json(self.config, f"{CONFIG}: not a campaign directory")
        if not isinstance(doc, dict):
            raise ValueError(f"{self.config}: must hold a JSON object, got {type(doc).__name__}")
        return doc

    def eval_dirs(self) -> list[Path]:
        """The campaign's evaluations, in increasing n: the evals/<n>/ (numbered_runs) that its loop
        recorded in the ledger of its trace, bytes unchanged (kernelseek.ledger). A results file that
        merely appeared there, or was changed since, is never one of them."""
        return self.ledger().verified

    def ledger(self) -> ledger.Check:
        """The ledger check: verified evaluations, and a line for each results file left out."""
        return ledger.check(self.root, self.trace, numbered_runs(self.evals), RESULTS)

    def evaluations(self) -> list[Run]:
        """Every evaluation, loaded, in order (see eval_dirs)."""
        return [Run.load(d) for d in self.eval_dirs()]

    def latest_eval(self) -> Path | None:
        ds = self.eval_dirs()
        return ds[-1] if ds else None

    def next_eval_number(self) -> int:
        """The number the next evaluation gets (next_number of evals/)."""
        return next_number(self.evals)

    def eval_dir(self, n: int | str) -> Path:
        return self.evals / str(n)

    def version_file(self, sha256: str) -> Path:
        """Where a lone kernel file with this source hash is kept: versions/<sha256>.cu."""
        return self.versions / f"{sha256}.cu"

    def version_dir(self, sha256: str) -> Path:
        """Where a kernel with local headers (or a kernel folder) is kept, laid out as in the workspace."""
        return self.versions / sha256

    def version_path(self, sha256: str, kernel_name: str) -> Path:
        """The kept version as the harness builds it: the lone file, else the kernel in its folder."""
        one = self.version_file(sha256)
        return one if one.is_file() else self.version_dir(sha256) / kernel_name

    def version_hashes(self, prefix: str = "") -> list[str]:
        """Hashes of the kept versions that start with `prefix`, sorted (half-written .tmp-* left out)."""
        if not self.versions.is_dir():
            return []
        return sorted({p.name.removesuffix(".cu") for p in self.versions.glob(f"{prefix}*")
                       if not p.name.startswith(".")})


def is_campaign(path: str | Path) -> bool:
    """A campaign directory: it has evals/ or a config.json."""
    c = Campaign(path)
    return c.evals.is_dir() or c.config.is_file()


def list_campaigns(root: str | Path) -> list[Path]:
    """Campaign directories directly under `root`, newest (last modified) first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and is_campaign(p)]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def campaign_evals(path: str | Path) -> list[Path]:
    """The run directories of a campaign's evaluations, in order (Campaign.eval_dirs)."""
    return Campaign(path).eval_dirs()


def trace_file(path: str | Path) -> Path:
    """A campaign directory's trace.jsonl; a path to a file is returned as given."""
    p = Path(path)
    return Campaign(p).trace if p.is_dir() else p


def find_results(path: str | Path) -> Path:
    """results.json of a run dir, a results.json path, or a campaign's latest evaluation recorded in
    its ledger (ledger.ForgedResults, a ValueError, when a recorded results file was changed)."""
    p = Path(path)
    if not p.is_dir() and results_file(p).is_file():            # a file, or a results.json packed beside
        return results_file(p)
    c = Campaign(p)
    if is_run(p, packed=not c.evals.is_dir()):                     # (a campaign's own folder: its ledger)
        return results_file(p)
    if c.evals.is_dir():        # the newest evaluation in the ledger; ForgedResults if one was changed
        return ledger.latest(c.ledger(), p) / RESULTS
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such run or campaign directory")
    raise FileNotFoundError(f"{p}: no {RESULTS} and no {EVALS}/ directory")

