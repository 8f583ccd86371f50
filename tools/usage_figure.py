"""Draw tokens, cached share and dollars per step of the scripted 200-step campaign.

    PYTHONPATH=. python3 tools/usage_figure.py [--out docs/campaign_usage.png] [--steps 200]

Runs the campaign of tests/fixtures/fakeapi/long_campaign.py (shell outputs of 20-60 kB, notes
written whole, evaluations replayed from tests/fixtures/runs/campaign, a 429, an empty reply, a
max_tokens cut and a paused turn) through the real loop and the real anthropic client against the
scripted Messages API on 127.0.0.1, priced as claude-opus-4-5 from data/prices.yaml. The server
counts tokens as request bytes / 4 and reads the cache only for byte-identical prefixes, so the
numbers show what the loop's context policy and cache breakpoints do, not a real model's tokens.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "fixtures" / "fakeapi")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "campaign_usage.png"))
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    from fakeapi import FakeAPI
    from harness import KEY, make
    from long_campaign import steps

    from kernelseek import analytics, plots, traces
    from kernelseek.agent import Loop, Prices
    os.environ["ANTHROPIC_API_KEY"] = KEY
    tmp = Path(tempfile.mkdtemp(prefix="usage-figure-"))
    with FakeAPI(steps(a.steps), key=KEY) as api:
        root = make(tmp, api.base_url, budget={"steps": a.steps + 50, "dollars": None, "wall_s": None},
                    api_max_retries=4, model="claude-opus-4-5", prices=None)
        out = Loop(root, log=lambda *x: None, sleep=lambda s: None).run()
    events = traces.read(root / "trace.jsonl")
    df = analytics.usage_by_step(events, Prices.load(), "claude-opus-4-5")
    fig = plots.usage_plot(df, title=f"scripted {len(df)}-step campaign on the fake API (tokens = bytes/4),\n"
                                     f"claude-opus-4-5 list prices: \\${df['usd'].sum():.2f} "
                                     f"(\\${df['uncached_usd'].sum():.2f} with no prompt cache)")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(out.line())
    print(f"prompt tokens {df['prompt_tokens'].sum()}, read from cache {df['cache_read_input_tokens'].sum() / df['prompt_tokens'].sum():.1%}, "
          f"largest request {df['prompt_tokens'].max()} tokens, compactions at steps {df.attrs['compaction_steps']}")
    print(f"${df['usd'].sum():.2f} (no cache: ${df['uncached_usd'].sum():.2f}) -> {a.out}; trace kept in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
