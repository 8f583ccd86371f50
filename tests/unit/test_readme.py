"""The README a newcomer reads: its two commands (and CI running the same test command), a command
list that matches the CLI's verbs, figures and links that exist, nothing a reader cannot follow, and
the dependency pins mirrored in environment.yml."""
import re
from pathlib import Path

import pytest
import yaml

from kernelseek.cli import VERBS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
INSTALL = "python3 -m pip install torch==2.13.0 && python3 -m pip install -e '.[test]' && kernelseek main"
TESTS = "python3 -m pytest -q tests"


def test_the_two_commands_and_ci_runs_the_readme_test_command():
    lines = [x.strip() for x in README.splitlines()]
    assert INSTALL in lines and TESTS in lines
    ci = [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines() if not x.strip().startswith("#")]
    assert TESTS in ci


def test_command_list_names_every_verb_and_no_other():
    block = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    used = set(re.findall(r"^\s+kernelseek (\w+)", block, re.M))
    assert used == set(VERBS), f"README lists {sorted(used ^ set(VERBS))} unlike the CLI"
    mentioned = set(re.findall(r"`kernelseek (\w+)", README))
    assert mentioned <= set(VERBS), mentioned - set(VERBS)


def test_links_and_images_exist():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / target).exists(), target
    assert "docs/speedup.png" in README and "docs/RESULTS.md" in README
    results = (ROOT / "docs" / "RESULTS.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", results):
        assert (ROOT / "docs" / target).exists(), target
    runs = re.findall(r"h200-[a-z0-9]+-\d{8}-\d{6}-[\w-]+", results + README)
    runs += [f"h200-bench26-20261130-{t}-fa3_hopper-v12" for t in re.findall(r"^\| (\d{6}) \|", results, re.M)]
    assert len(runs) >= 7
    for run in runs:          # committed runs (data/runs/) or check runs kept apart (data/checks/)
        assert any((ROOT / "data" / d / run).is_dir() for d in ("runs", "checks")), run


def test_nothing_a_reader_cannot_follow():
    for text, name in ((README, "README.md"), ((ROOT / "docs" / "RESULTS.md").read_text(), "RESULTS.md")):
        for pattern in (r"\bissues? \d", r"#\d+\b", r"device tool", r"GPU image", r"\.\./shared/", r"KSEEK_GIT_REV"):
            assert not re.search(pattern, text, re.I), f"{name}: {pattern}"


def test_notebooks_and_requirements_are_documented():
    assert "jupyter lab notebooks/" in README
    for need in ("CUDA 12.8", "nvcc", "ncu", "bubblewrap", "chromium", "ANTHROPIC_API_KEY"):
        assert need in README, need


def test_pins_mirrored_in_environment_yml():
    tomllib = pytest.importorskip("tomllib")          # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["test"]
    assert "jupyterlab==4.6.6" in pins
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(p for p in pip if "==" in p) == sorted(pins)
