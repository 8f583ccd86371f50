"""Every verb's bad inputs (issue 28 part 1): one line on stderr naming the file, field or scenario at
fault, the documented exit code (cli.EXIT_CODES), never a traceback, and no work done first.

CASES is the table of bad inputs per verb. test_bad_inputs runs each verb's cases in process through
cli.main (one test per verb); test_no_traceback_as_a_real_process runs every case as
`python -m kernelseek ...`, the way a user meets it. The tests after those pin what a case cannot
show: nothing built or written before the stop, the compiler's own lines in a build failure's rows.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelseek.cli import EXIT_CODES, VERBS, main
from kernelseek.cudatools import find_tool

ROOT = Path(__file__).resolve().parents[2]
K = str(ROOT / "kernels" / "naive_fwd.cu")          # a good kernel file
RUN = str(ROOT / "tests" / "fixtures" / "runs" / "met")   # a good run directory
SASS = str(ROOT / "tests" / "fixtures" / "sass" / "tiny.sass")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}


def _gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


GPU, NCU = _gpu(), find_tool("ncu") is not None
NO_NVCC = {"KSEEK_NVCC": "/nonexistent/nvcc"}

# verb -> [(argv, exit code, text the one stderr line must hold, extra environment, stdin)]; {T} is
# the folder make_inputs fills. A case that needs this machine to lack something is None elsewhere.
CASES: dict[str, list] = {
    "main": [(["main", "--grid", "nosuch"], 2, "grid 'nosuch'"),
             (["main", "--kernel", "{T}/none.cu"], 2, "none.cu: no such file or folder"),
             (["main", "--out", "{T}/plain/figs"], 2, "plain/figs: not a directory"),
             (["main", "--define", "A=b c"], 2, "build define A='b c'"),
             None if GPU else (["main", "--define", "A=1"], 2, "the replay of committed results builds nothing")],
    "eval": [None if GPU else (["eval", K, "--runs-dir", "{T}/runs"], 2, "no CUDA GPU here"),
             (["eval", K, "--runs-dir", "{T}/runs"], 2, "/nonexistent/nvcc", NO_NVCC),
             (["eval", "{T}/none.cu", "--runs-dir", "{T}/runs"], 2, "kernel {T}/none.cu: no such file or folder"),
             (["eval", K, "--grid", "{T}/latin.yaml"], 2, "latin.yaml: not valid YAML"),
             (["eval", K, "--baseline", "nosuch"], 2, "unknown baseline 'nosuch'"),
             (["eval", K, "--baseline", "{T}/none.cu"], 2, "none.cu: not found"),
             (["eval", K, "--timeout", "-5"], 2, "--timeout -5.0"),
             (["eval", K, "--timeout", "abc"], 2, "argument --timeout: invalid float value"),
             (["eval", K, "--graph", "--graph-rounds", "99"], 2, "--graph-rounds 99: expected a whole number from 0 to 20"),
             (["eval", K, "--scenarios", "zzz_nothing"], 2, "zzz_nothing"),
             (["eval", K, "--define", "1X=2"], 2, "build define '1X'"),
             (["eval", "{T}/emptydir"], 2, "kernel folder {T}/emptydir: no emptydir/emptydir.cu")],
    "peers": [None if GPU else (["peers", K, "--grid", "smoke", "--runs-dir", "{T}/runs"], 2, "--from RUN_DIR"),
              (["peers", "--from", "{T}/emptydir"], 2, "emptydir/results.json: no results file"),
              (["peers", "--from", "{T}/notjson"], 2, "notjson/results.json: not valid JSON"),
              (["peers", K, "--grid", "nosuch"], 2, "grid 'nosuch'"),
              (["peers", K, "--baseline", "nosuch"], 2, "unknown baseline 'nosuch'")],
    "grid": [(["grid", "{T}/latin.yaml"], 2, "latin.yaml: not valid YAML"),
             (["grid", "nosuch"], 2, "grid 'nosuch': no such grid"),
             (["grid", "smoke", "--scenarios", "zzz_nothing"], 2, "zzz_nothing")],
    "build": [(["build", "{T}/none.cu"], 2, "none.cu: no such file"),
              (["build", K], 2, "/nonexistent/nvcc", NO_NVCC),
              (["build", K, "--arch", "sm_x"], 2, "arch 'sm_x'"),
              (["build", K, "--define", "A", "--define", "A=2"], 2, "A is defined twice"),
              (["build", "{T}/emptydir"], 2, "no emptydir/emptydir.cu")],
    "show": [(["show", "runs/20990101-nope"], 2, "no such run directory (committed H200 runs are under data/runs/)"),
             (["show", "{T}/emptydir"], 2, "emptydir/results.json: no results file"),
             (["show", "{T}/notjson"], 2, "notjson/results.json: not valid JSON"),
             (["show", "{T}/nonutf8"], 2, "nonutf8/results.json: not UTF-8"),
             (["show", "{T}/shape"], 2, "shape/results.json: field 'rows'"),
             (["show", "{T}/badrow/results.json"], 2, "rows[0] (r1): field 'speedup' is 'fast'"),
             (["show", "{T}/badmeta"], 2, "badmeta/results.json: field 'meta'")],
    "triage": [(["triage", "{T}/missing"], 2, "missing: no results file"),
               (["triage", "{T}/badrow"], 2, "field 'speedup'"),
               (["triage", RUN, "--compare", "{T}/notjson"], 2, "notjson/results.json"),
               (["triage", RUN, "--repeat", "{T}/missing"], 2, "missing: no results file"),
               (["triage", "{T}/camp"], 2, "camp: no evaluations under evals/"),
               (["triage", RUN, "--plot", "{T}/plain/x.png"], 2, "plain/x.png")],
    "bounds": [(["bounds", "{T}/nonutf8"], 2, "nonutf8/results.json: not UTF-8"),
               (["bounds", RUN, "--ceilings", "{T}/garbage.json"], 2, "garbage.json: not a ceilings JSON"),
               (["bounds", RUN, "--ceilings", "{T}/list.json"], 2, "list.json: not a ceilings file"),
               (["bounds", RUN, "--ceilings", "{T}/none.json"], 2, "none.json: no such ceilings file"),
               (["bounds", RUN, "--csv", "{T}/plain/x.csv"], 2, "plain/x.csv")],
    "ceilings": [None if GPU else (["ceilings"], 2, "no CUDA device here")],
    "profile": [(["profile"], 2, "give the command to profile after --"),
                None if NCU else (["profile", "--", "true"], 2, "ncu not found"),
                (["profile", "--import", "{T}/none.ncu-rep"], 2, "none.ncu-rep: no such report file")],
    "sass": [(["sass", "{T}/none.so"], 2, "none.so: no such file"),
             (["sass", "{T}/bin.so"], 2, "bin.so"),
             (["sass", SASS, "--kernel", "nomatch"], 2, "no kernel matching 'nomatch'"),
             (["sass", SASS, "--ptxas", "{T}/none.txt"], 2, "none.txt: no such file")],
    "bank": [(["bank"], 2, "give a subcommand: lint, list, ask"),
             (["bank", "lint", "{T}/none.yaml"], 2, "none.yaml: no such bank file or directory"),
             (["bank", "list", "{T}/bank.yaml"], 2, "bank.yaml:3: YAML error"),
             (["bank", "list", "{T}/latin.yaml"], 2, "latin.yaml:0: not UTF-8 text"),
             (["bank", "ask", "nomoment"], 2, "invalid choice: 'nomoment'"),
             (["bank", "ask", "start", "{T}/nonutf8"], 2, "nonutf8/results.json: not UTF-8")],
    "goal": [(["goal", "{T}/missing"], 2, "missing"),
             (["goal", "{T}/badrow"], 2, "field 'speedup'"),
             (["goal", RUN, "--goal", "{T}/goal.yaml"], 2, "goal.yaml: not valid YAML"),
             (["goal", RUN, "--goal", "{T}/none.yaml"], 2, "none.yaml")],
    "review": [(["review", "{T}/missing"], 2, "missing: no results file"),
               (["review", "{T}/badrow", "--list"], 2, "field 'speedup'"),
               (["review", RUN, "--scenario", "nope", "--note", "x"], 2, "no scenario 'nope'"),
               (["review", RUN, "--scenario", "dense_causal", "--note", "x"], 2, "dense_causal is not flagged"),
               (["review", RUN, "--scenario", "dense_causal"], 2, "a review needs a note")],
    "hook": [(["hook"], 2, "give a subcommand: stop"),
             (["hook", "stop"], 0, "the Stop payload is not JSON", {}, "not json {")],
    "init": [(["init"], 2, "give a subcommand: claude-code"),
             (["init", "claude-code", "--dir", "{T}/plain"], 2, "plain/.claude: not a directory"),
             (["init", "claude-code", "--dir", "{T}/badsettings"], 2, "settings.json: not valid JSON")],
    "campaign": [(["campaign"], 2, "give a subcommand: run, matrix, resume, restore, status"),
                 (["campaign", "status", "{T}/missing"], 2, "missing: no such campaign directory"),
                 (["campaign", "status", "{T}/emptydir"], 2, "emptydir/config.json: no config.json: not a campaign directory"),
                 (["campaign", "resume", "{T}/missing"], 2, "missing: no such campaign directory"),
                 (["campaign", "restore", "{T}/emptydir", "1"], 2, "emptydir/config.json: no config.json"),
                 (["campaign", "run", "--kernel", "{T}/none.cu"], 2, "none.cu: no such kernel file or folder"),
                 (["campaign", "run", "--kernel", K, "--goal", "{T}/goal.yaml"], 2, "goal.yaml: not valid YAML"),
                 (["campaign", "run", "--kernel", K, "--grid", "{T}/latin.yaml"], 2, "latin.yaml"),
                 (["campaign", "run", "--kernel", K, "--steps", "0"], 2, "--steps 0"),
                 (["campaign", "matrix", "--kernel", K, "--arms", "bare,nosuch"], 2, "unknown arm nosuch")],
    "ask": [(["ask", "{T}/missing", "why?"], 2, "missing: no such campaign directory"),
            (["ask", "{T}/emptydir", "  "], 2, "the question is empty")],
    "trace": [(["trace"], 2, "give a subcommand: import-claude-code, stats"),
              (["trace", "stats", "{T}/none.jsonl"], 2, "none.jsonl: no such trace file"),
              (["trace", "stats", "{T}/trace.jsonl"], 2, "trace.jsonl: no trace event in it"),
              (["trace", "stats", "{T}/emptydir"], 2, "emptydir/trace.jsonl: no such trace file"),
              (["trace", "import-claude-code", "{T}/none.jsonl"], 2, "none.jsonl: no such session file"),
              (["trace", "import-claude-code", "{T}/trace.jsonl", "--out", "{T}/o.jsonl"], 2,
               "trace.jsonl: no user or assistant lines")],
    "report": [(["report", "{T}/missing"], 2, "missing: no such run or campaign directory"),
               (["report", "{T}/badrow"], 2, "field 'speedup'"),
               (["report", "{T}/camp"], 2, "camp: no evaluations under evals/"),
               (["report", RUN, "--compare", "{T}/missing"], 2, "missing: no such run directory"),
               (["report", RUN, "--ceilings", "{T}/garbage.json"], 2, "garbage.json: not a ceilings JSON")],
}
TOP = [([], 0, ""), (["--help"], 0, ""), (["-h"], 0, ""),
       (["nosuch"], 2, "kernelseek: unknown verb 'nosuch'"), (["--bogus"], 2, "kernelseek: unknown option '--bogus'")]


def make_inputs(t: Path) -> Path:
    """The bad (and a few good) inputs the cases name, under t."""
    (t / "latin.yaml").write_bytes(b"grid: x\nscenarios:\n  - name: caf\xe9\n")   # Latin-1, not UTF-8
    (t / "garbage.json").write_text("not json {")
    (t / "list.json").write_text("[1, 2]")
    (t / "plain").write_text("a file, not a folder")
    (t / "bin.so").write_bytes(b"\x00\x01\x02 not an ELF")
    (t / "trace.jsonl").write_text("garbage\n{\"x\":\n[1]\n")
    (t / "goal.yaml").write_text("geomean: [\n")
    (t / "bank.yaml").write_text("entries:\n  - [\n")
    for d in ("emptydir", "camp/evals", "notjson", "nonutf8", "shape", "badrow", "badmeta", "badsettings/.claude"):
        (t / d).mkdir(parents=True, exist_ok=True)
    (t / "notjson" / "results.json").write_text('{"rows": [')
    (t / "nonutf8" / "results.json").write_bytes(b'\xff\xfe{"rows": []}')
    (t / "shape" / "results.json").write_text('{"rows": 5}')
    (t / "badrow" / "results.json").write_text('{"meta": {}, "rows": [{"scenario": "r1", "status": "passed", '
                                               '"speedup": "fast"}]}')
    (t / "badmeta" / "results.json").write_text('{"meta": [], "rows": []}')
    (t / "badsettings" / ".claude" / "settings.json").write_text("{not json")
    return t


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    return make_inputs(tmp_path_factory.mktemp("bad"))


def _case(c):
    c = list(c)
    argv, code, needle, env, stdin = c + [{}, ""][len(c) - 3:]
    return argv, code, needle, env, stdin


def _fill(x: str, t: Path) -> str:
    return x.replace("{T}", str(t))


def _check(code, err, want_code, needle):
    assert "Traceback" not in err, err
    assert code == want_code, f"exit {code}, want {want_code}; stderr: {err}"
    if want_code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"want one line on stderr, got:\n{err}"
        assert lines[0].startswith("kernelseek"), lines[0]
    assert needle in err, f"{needle!r} not in stderr: {err}"


def test_every_verb_has_bad_input_cases_with_documented_codes():
    assert set(CASES) == set(VERBS)
    for verb, cases in CASES.items():
        for c in filter(None, cases):
            assert f"\n  {_case(c)[1]}  " in "\n" + EXIT_CODES, f"{verb}: exit code {c[1]} is not documented"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_bad_inputs(verb, inputs, monkeypatch, capsys):
    """One test per verb: each of its bad inputs through cli.main, in process."""
    monkeypatch.chdir(inputs)
    cases = [c for c in CASES[verb] if c]
    if not cases:
        pytest.skip(f"{verb}: its only case needs a machine without a GPU")
    for c in cases:
        argv, code, needle, env, stdin = _case(c)
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            m.setattr(sys, "stdin", io.StringIO(stdin))
            rc = main([_fill(a, inputs) for a in argv])
        out = capsys.readouterr()
        _check(rc, out.err, code, _fill(needle, inputs))


def _run(argv, env, stdin, cwd) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-m", "kernelseek", *argv], cwd=cwd, env={**ENV, **env}, input=stdin,
                       capture_output=True, text=True, timeout=180)
    return p.returncode, p.stderr


ALL = [(v, i, c) for v, cs in CASES.items() for i, c in enumerate(cs) if c] + [("top", i, c) for i, c in enumerate(TOP)]


@pytest.fixture(scope="module")
def as_processes(inputs) -> dict:
    """Every case run as `python -m kernelseek ...`, a few at a time (each is a fresh interpreter)."""
    def one(case):
        argv, _, _, env, stdin = _case(case[2])
        return (case[0], case[1]), _run([_fill(a, inputs) for a in argv], env, stdin, inputs)
    with ThreadPoolExecutor(max_workers=4) as ex:
        return dict(ex.map(one, ALL))


@pytest.mark.parametrize("verb,i,case", ALL, ids=[f"{v}-{i}" for v, i, _ in ALL])
def test_no_traceback_as_a_real_process(verb, i, case, as_processes, inputs):
    argv, code, needle, _, _ = _case(case)
    rc, err = as_processes[(verb, i)]
    _check(rc, err, code, _fill(needle, inputs))


def test_top_level_help_and_verbs(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes" in out and "141" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("campaign "))
    assert "status" in line and "show" not in line            # there is no `campaign show`
    for verb in VERBS:
        assert main([verb, "--help"]) == 0, verb
    capsys.readouterr()


def test_eval_without_the_machine_stops_before_building_or_writing(tmp_path, monkeypatch, capsys):
    """No nvcc (and, here, no GPU): one line, exit 2, no build cache entry, no run directory."""
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KSEEK_NVCC", str(tmp_path / "no-nvcc"))
    assert main(["eval", K, "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "nvcc" in capsys.readouterr().err
    if not GPU:
        monkeypatch.delenv("KSEEK_NVCC")
        assert main(["eval", K, "--runs-dir", str(tmp_path / "runs")]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "runs").exists()


def test_a_missing_kernel_leaves_no_run_directory(tmp_path):
    from kernelseek.evaluate import evaluate
    with pytest.raises(FileNotFoundError, match="nope.cu"):
        evaluate(str(tmp_path / "nope.cu"), "smoke", runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.skipif(find_tool("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="needs nvcc")
def test_a_build_failure_row_shows_the_compilers_error_lines(tmp_path, monkeypatch):
    """Refused rows carry nvcc's `error` lines, not a slice of the nvcc command line (no GPU needed:
    a kernel that does not build never reaches the worker)."""
    from kernelseek.evaluate import evaluate, exit_code
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "broken.cu"
    bad.write_text('#include "kseek.h"\nextern "C" int kseek_fwd(void) { return undefined_name_xyz; }\n')
    run, rows, _ = evaluate(str(bad), "smoke", scenarios="dense_causal", runs_dir=str(tmp_path / "runs"), progress=False)
    assert exit_code(rows) == 3 and {r.status for r in rows} == {"refused"}
    reason = rows[0].reason
    assert reason.startswith("build failed: ") and "undefined_name_xyz" in reason and "error" in reason
    assert "-gencode" not in reason and "-Xptxas" not in reason, reason


def test_compiler_errors_skips_the_command_line():
    from kernelseek.evaluate import compiler_errors
    log = ("/usr/local/cuda/bin/nvcc -gencode=arch=compute_90a,code=sm_90a -O3 x.cu -o x.so\n"
           "x.cu(3): error: identifier \"foo\" is undefined\n\n1 error detected in the compilation of \"x.cu\".\n")
    assert compiler_errors(log) == 'x.cu(3): error: identifier "foo" is undefined | 1 error detected in the ' \
                                   'compilation of "x.cu".'
    assert compiler_errors("nvcc -O3 x.cu\nnvcc timed out after 900 s\n") == "nvcc timed out after 900 s"


def test_results_load_names_the_field_at_fault(inputs):
    from kernelseek import results
    with pytest.raises(ValueError, match=r"badrow/results.json: rows\[0\] \(r1\): field 'speedup' is 'fast', "
                                         r"expected float or None"):
        results.load(inputs / "badrow")
    assert results.row_problem({"scenario": "a", "status": "passed", "row": True}) == \
        "field 'row' is True, expected int or None"
    assert results.row_problem({"scenario": "a", "status": "weird"}).startswith("field 'status' is 'weird'")
    assert results.row_problem({"scenario": "a", "status": "passed", "time_ms": 1, "features": {}}) is None


def test_the_readme_documents_the_same_exit_codes():
    import re
    in_cli = set(re.findall(r"^\s{2}(\d+)\s{2}", EXIT_CODES, re.M))
    in_readme = set(re.findall(r"^\| (\d+) \|", (ROOT / "README.md").read_text(), re.M))
    assert in_cli == in_readme == {"0", "1", "2", "3", "4", "5", "141"}
