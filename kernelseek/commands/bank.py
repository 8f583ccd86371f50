"""`kernelseek bank lint | list | ask | eval`: check the question bank, list its entries, pick a
question, score the bank questioner on the questioner benchmark (data/questioner_bench).

lint exits 1 when the bank has errors (each `file:line: error: ...`); a path that does not exist, a
bank that does not load (list, ask) or a bad results folder (ask) is one line, exit 2.
"""
from __future__ import annotations

from . import about, existing, needs_subcommand, user_input
from .. import bank as BK
from .. import bank_lint


def register(subparsers) -> None:
    p = subparsers.add_parser("bank", description=about(__doc__))
    bs = p.add_subparsers(dest="bank_cmd", metavar="CMD")
    lp = bs.add_parser("lint", help="check the bank (exit 1 on any error; each error names file:line)")
    lp.add_argument("paths", nargs="*", help="bank files or directories (default: the shipped bank/)")
    lp.add_argument("--counts", action="store_const", const=True, default=None,
                    help="check the minimum entry counts (default: only for the shipped bank)")
    lp.add_argument("--no-counts", dest="counts", action="store_const", const=False)
    lp.set_defaults(func=_lint)
    ls = bs.add_parser("list", help="entries, filtered by moment, group or tier")
    ls.add_argument("paths", nargs="*")
    ls.add_argument("--moment", choices=BK.MOMENTS)
    ls.add_argument("--group", choices=BK.GROUPS)
    ls.add_argument("--tier", choices=BK.TIERS)
    ls.set_defaults(func=_list)
    ap = bs.add_parser("ask", help="pick a question for a moment, slots filled from a run")
    ap.add_argument("moment", choices=BK.MOMENTS)
    ap.add_argument("run", nargs="?", help="run or campaign directory whose results fill the slots")
    ap.add_argument("--asked", nargs="*", default=[], help="ids already asked (never repeated)")
    ap.add_argument("--allow-repeat", action="store_true")
    ap.add_argument("--reference", action="store_true", help="another implementation is available")
    ap.add_argument("--arch", choices=BK.ARCHS)
    ap.add_argument("--seed", type=int, default=0)
    ap.set_defaults(func=_ask)
    ep = bs.add_parser("eval", help="score triggers + selection on the questioner benchmark")
    ep.add_argument("bench", nargs="*", help="benchmark files or directories (default: data/questioner_bench)")
    ep.add_argument("--bank", nargs="*", default=None, help="bank files or directories (default: bank/)")
    ep.add_argument("--json", action="store_true", help="the summaries as JSON instead of the table")
    ep.set_defaults(func=_eval)
    needs_subcommand(p, bs)


def _lint(args) -> int:
    for p in args.paths:
        existing(p, "bank file or directory")
    issues = bank_lint.lint(args.paths or None, counts=args.counts)
    for i in issues:
        print(i)
    entries, _, _ = BK.read_bank(args.paths or None)
    by = {t: sum(e.tier == t for e in entries) for t in BK.TIERS}
    print(f"bank: {len(entries)} entries ({', '.join(f'{t} {n}' for t, n in by.items())}) in "
          f"{len(BK.bank_files(args.paths or None))} files; {len(issues)} error(s)")
    return 1 if issues else 0


def _list(args) -> int:
    for p in args.paths:
        existing(p, "bank file or directory")
    with user_input():
        entries = BK.load(args.paths or None)
    shown = [e for e in entries if (not args.moment or args.moment in e.moments)
             and (not args.group or e.group == args.group) and (not args.tier or e.tier == args.tier)]
    for e in shown:
        tag = e.tier + (f":{e.arch}" if e.arch else "")
        print(f"{e.id:8} {e.group:19} {tag:15} {e.layer:16} {e.text}")
    print(f"{len(shown)} of {len(entries)} entries")
    return 0


def _ask(args) -> int:
    rows, meta = None, None
    if args.run:
        from ..goal import find_results
        from ..results import load as load_results
        existing(args.run, "run or campaign directory")
        with user_input(args.run):
            rows, meta = load_results(find_results(args.run))
    with user_input():
        q = BK.select(args.moment, rows, meta=meta, asked=args.asked, reference=args.reference,
                      arch=args.arch, allow_repeat=args.allow_repeat, seed=args.seed)
    if q is None:
        print(f"no question left for moment {args.moment} (try --allow-repeat)")
        return 1
    print(f"[{q.id} | {q.group} | {q.layer}] {q.text}\n  check: {q.check}")
    return 0


def _eval(args) -> int:
    from .. import bank_eval
    for p in args.bench + (args.bank or []):
        existing(p, "benchmark or bank file or directory")
    with user_input():
        sits = bank_eval.load_bench(args.bench or None)
        entries = BK.load(args.bank or None)
    result = bank_eval.evaluate(sits, entries)
    if args.json:
        import json
        print(json.dumps({k: result[k] for k in ("tuning", "held_back", "all")}, indent=1))
    else:
        print(bank_eval.report(result))
    return 0
