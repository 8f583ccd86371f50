"""The questioner's console: one campaign's latest results, triage, bounds, timeline, alerts and bank.

    c = Console("campaigns/<id>", ceilings="data/ceilings/NVIDIA_H200.json")
    display(c.widget); c.start_watching(5.0)        # notebooks/console.ipynb does this

Everything a handler did lands in `c.state` (plain dicts and lists: what tests read). Handlers call
results, triage, bounds, plots, triggers, bank and inbox; they hold no analysis of their own. The
widget tree is built on first use of `c.widget`; without it the console still works headlessly.
"""
from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

from kernelseek import bank, bounds, inbox, plots, results, store, traces, triage, triggers

MAX_SHOWN = 60            # bank entries listed at once (the filter narrows them)
TABLE_COLUMNS = ["row", "scenario", "status", "time_ms", "baseline", "baseline_ms", "speedup", "err_ratio", "reason"]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


list_campaigns = store.list_campaigns    # campaign directories under a root, newest first


class Console:
    """A campaign's console; see the module docstring."""

    def __init__(self, campaign=None, *, root="campaigns", ceilings=None, bank_paths=None, source="console"):
        self.root, self.ceilings_path, self.source = Path(root), ceilings, source
        self.entries = bank.load(bank_paths)
        self.state: dict = {"campaign": None, "evals": 0, "latest": None, "summary": {}, "timeline": [],
                            "refreshes": 0, "alerts": [], "firing": [], "filter": {"moment": None, "group": None},
                            "shown": [], "asked": [], "errors": [], "plots": {}, "actions": []}
        self.rows, self.meta, self.bounds, self.ceilings = [], {}, None, None
        self.slots: dict = bank.values()[0]   # bank slot -> text from the latest results (what Ask fills in)
        self.figures: dict[str, bytes] = {}
        self.campaign: Path | None = None
        self._sig, self._ui, self._task = None, None, None
        first = campaign or next(iter(list_campaigns(self.root)), None)
        if first is not None:
            self.open(first)
        self.set_filter()

    # ---- handlers ------------------------------------------------------------------------------
    def open(self, campaign) -> None:
        """Point the console at another campaign (alerts and asks start afresh) and refresh."""
        self.campaign = Path(campaign)
        self.state.update(campaign=str(self.campaign), evals=0, latest=None, alerts=[], firing=[], asked=[])
        self._sig = None
        self._log("open", str(self.campaign))
        self.refresh()

    def refresh(self, force: bool = True) -> bool:
        """Reload the latest evaluation, its triage, bounds, the timeline and the triggers.

        With force False, only when an evaluation landed or changed; returns whether it reloaded."""
        evs = store.campaign_evals(self.campaign)
        sig = [(p.name, store.results_file(p).stat().st_mtime_ns) for p in evs]
        if not force and sig == self._sig:
            return False
        if not evs:
            self.rows, self.meta, self.bounds, self.figures, self.slots = [], {}, None, {}, bank.values()[0]
            self.state.update(evals=0, latest=None, summary={}, timeline=[], plots={}, firing=[])
            self._sig = sig
            self._error(f"{self.campaign}: no evaluations under evals/ yet")
            self._render()
            return True
        self.rows, self.meta = results.load(evs[-1])
        tri = triage.triage(self.rows)
        tl = triage.timeline(evs)
        self.bounds = self._bounds()
        title = f"evaluation {evs[-1].name}: speedup per row"
        run = evs[-1].relative_to(self.campaign.parent).as_posix()     # <campaign>/<its evaluations>/<n>
        self.figures = {"triage": _png(plots.speedup_bars(self.rows, title=title, meta=self.meta, run=run)),
                        "timeline": _png(plots.timeline_plot(tl, meta=self.meta))}
        if self.bounds is not None:
            self.figures["bounds"] = _png(plots.sol_bars(self.bounds, meta=self.meta, run=run))
        cols = ["eval", "label", "geomean", "worst_speedup", "passed", "scenarios"]
        self.state.update(evals=len(evs), latest=str(evs[-1]), summary=results.summarize(self.rows),
                          triage=tri.summary, refreshes=self.state["refreshes"] + 1,
                          timeline=tl[cols].to_dict("records"), plots={k: len(v) for k, v in self.figures.items()})
        self.slots = bank.values(self.rows, bounds=self.bounds, meta=self.meta)[0]
        self._sig = sig
        self._alerts()
        self._log("refresh", evs[-1].name)
        self._render()
        if self._ui is not None:
            self._render_bank()
        return True

    def poll(self) -> bool:
        """Refresh only if an evaluation landed since the last look."""
        return self.refresh(force=False)

    def set_filter(self, moment: str | None = None, group: str | None = None) -> list[str]:
        """Show the bank entries that fit `moment` and `group` (None: any); returns their ids."""
        arch = bank.arch_of(bounds._gpu_name(self.meta))
        shown = [e.id for e in self.entries if (moment is None or moment in e.moments)
                 and (group is None or e.group == group) and e.usable(reference=True, arch=arch)]
        self.state.update(filter={"moment": moment, "group": group}, shown=shown)
        self._log("filter", {"moment": moment, "group": group, "shown": len(shown)})
        if self._ui is not None:
            self._render_bank()
        return shown

    def ask(self, bank_id: str, moment: str | None = None) -> dict:
        """Ask a bank entry (its slots filled from the latest results) through the campaign's inbox."""
        entry = next((e for e in self.entries if e.id == bank_id), None)
        if self.campaign is None:
            raise ValueError("no campaign is open")
        if entry is None:
            raise KeyError(f"no bank entry {bank_id!r}")
        moment = moment or self.state["filter"]["moment"]
        rec = inbox.ask(self.campaign, bank.fill(entry.text, self.slots), source=self.source, bank_id=bank_id,
                        moment=moment)
        return self._asked(rec)

    def ask_text(self, text: str) -> dict:
        """Ask a question in the person's own words through the campaign's inbox."""
        if self.campaign is None:
            raise ValueError("no campaign is open")
        return self._asked(inbox.ask(self.campaign, text, source=self.source))

    async def watch(self, every: float = 5.0, rounds: int | None = None) -> None:
        """Poll every `every` seconds (forever, or `rounds` times)."""
        n = 0
        while rounds is None or n < rounds:
            await asyncio.sleep(every)
            try:
                self.poll()
            except Exception as e:  # a half-written evaluation must not stop the watch
                self._error(f"refresh failed: {e}")
            n += 1

    def start_watching(self, every: float = 5.0):
        """Run `watch` on the kernel's event loop (a notebook or Voila); returns the task."""
        if every and every > 0 and self._task is None:
            self._task = asyncio.ensure_future(self.watch(every))
        return self._task

    def snapshot(self) -> dict:
        """The state as plain JSON-able data, plus the pending inbox."""
        return dict(self.state, pending=inbox.pending(self.campaign) if self.state["campaign"] else [])

    # ---- helpers -------------------------------------------------------------------------------
    def _bounds(self):
        try:
            self.ceilings = bounds.load_ceilings(bounds._gpu_name(self.meta), self.ceilings_path)
            return bounds.bounds_table(self.rows, self.ceilings, self.meta)
        except (FileNotFoundError, ValueError) as e:
            self._error(f"no bounds: {e}")
            return None

    def _alerts(self) -> None:
        msgs = [triggers.Message(e.get("role", ""), traces.text_of(e.get("content")), e.get("t") or 0.0)
                for e in traces.read(self.campaign) if e["type"] == "message"]
        hist = triggers.History.from_campaign(self.campaign, messages=msgs)
        firing = triggers.detect(hist)
        seen = {(a["kind"], a["reason"]) for a in self.state["alerts"]}
        asked = [a.get("bank_id") for a in self.state["asked"] if a.get("bank_id")]
        for m in firing:
            if (m.kind, m.reason) in seen:
                continue
            q = bank.select(m.kind, self.rows, bounds=self.bounds, meta=self.meta, entries=self.entries,
                            asked=asked, prefer_groups=m.prefer_groups, reference=True,
                            arch=bank.arch_of(bounds._gpu_name(self.meta)))
            self.state["alerts"].append({"kind": m.kind, "reason": m.reason, "eval": self.state["evals"] - 1,
                                         "time": _now(), "question": q.to_dict() if q else None})
        self.state["firing"] = [m.kind for m in firing]

    def _asked(self, rec: dict) -> dict:
        self.state["asked"].append(rec)
        self._log("ask", {"line": rec.get("line"), "bank_id": rec.get("bank_id")})
        self._status(f"asked (inbox line {rec.get('line')}): {rec['text']}")
        return rec

    def _log(self, what: str, detail) -> None:
        self.state["actions"].append({"time": _now(), "action": what, "detail": detail})

    def _error(self, msg: str) -> None:
        self.state["errors"].append(msg)
        self._status(msg)

    def _status(self, msg: str) -> None:
        if self._ui is not None:
            self._ui["status"].value = f"<span class='ks-status-text'>{_esc(msg)}</span>"

    def _call(self, fn, *args) -> None:
        """A widget callback: run a handler; an exception becomes an error line, not a dead button."""
        try:
            fn(*args)
        except Exception as e:
            self._error(f"{getattr(fn, '__name__', 'action')} failed: {e}")

    # ---- widgets -------------------------------------------------------------------------------
    @property
    def widget(self):
        """The ipywidgets tree (built once)."""
        if self._ui is None:
            self._build()
            self._render()
            self._render_bank()
        return self._ui["root"]

    def _build(self) -> None:
        import ipywidgets as w
        ui: dict = {}
        opts = [str(p) for p in list_campaigns(self.root)]
        cur = self.state["campaign"]
        ui["campaign"] = w.Dropdown(options=sorted(set(opts + ([cur] if cur else []))), value=cur,
                                    description="campaign", layout=w.Layout(width="60%"))
        ui["campaign"].observe(lambda ch: self._call(self.open, ch["new"]) if ch["new"] else None, names="value")
        ui["refresh"] = w.Button(description="Refresh", icon="refresh")
        ui["refresh"].on_click(lambda _: self._call(self.refresh))
        ui["header"] = w.HTML()
        ui["status"] = w.HTML("<span class='ks-status-text'>ready</span>")
        ui["alerts"] = w.VBox()
        ui["table"] = w.HTML(layout=w.Layout(max_height="320px", overflow="auto"))
        ui["plots"] = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        ui["moment"] = w.Dropdown(options=[("any moment", None)] + [(m, m) for m in bank.MOMENTS], description="moment")
        ui["group"] = w.Dropdown(options=[("any group", None)] + [(g, g) for g in bank.GROUPS], description="group")
        for dd in (ui["moment"], ui["group"]):
            dd.observe(lambda ch: self._call(self.set_filter, ui["moment"].value, ui["group"].value), names="value")
        ui["count"] = w.HTML()
        ui["bank"] = w.VBox(layout=w.Layout(max_height="420px", overflow="auto", flex_flow="column nowrap"))
        ui["free"] = w.Textarea(placeholder="Ask the agent a question in your own words", layout=w.Layout(width="70%"))
        ui["ask_free"] = w.Button(description="Ask", button_style="primary")
        ui["ask_free"].on_click(lambda _: self._call(self._ask_free))
        for name in ("campaign", "refresh", "header", "status", "alerts", "table", "moment", "group",
                     "count", "bank", "free", "ask_free"):
            ui[name].add_class(f"ks-{name.replace('_', '-')}")
        ui["root"] = w.VBox([
            w.HBox([ui["campaign"], ui["refresh"]]), ui["header"], ui["status"],
            w.HTML("<h3>Alerts</h3>"), ui["alerts"],
            w.HTML("<h3>Latest evaluation</h3>"), ui["plots"], ui["table"],
            w.HTML("<h3>Question bank</h3>"), w.HBox([ui["moment"], ui["group"]]), ui["count"], ui["bank"],
            w.HTML("<h3>Your own question</h3>"), w.HBox([ui["free"], ui["ask_free"]])])
        ui["root"].add_class("ks-console")
        self._ui = ui

    def _ask_free(self) -> None:
        self.ask_text(self._ui["free"].value)
        self._ui["free"].value = ""

    def _render(self) -> None:
        if self._ui is None:
            return
        import ipywidgets as w
        ui, s, st = self._ui, self.state["summary"], self.state
        gm = s.get("geomean_speedup")
        ui["header"].value = (
            f"<b>{_esc(st['campaign'] or 'no campaign')}</b>: {st['evals']} evaluation(s); latest passed "
            f"{s.get('passed', 0)}/{s.get('scenarios', 0)}, geomean {f'{gm:.3f}x' if gm else 'n/a'}, at parity "
            f"{s.get('at_parity', 0)}/{s.get('timed', 0)} <small>(refresh {st['refreshes']}, {_now()})</small>")
        # each figure at its own size (its labels stay readable), shrunk only to fit the page's width
        ui["plots"].children = [w.Image(value=png, format="png", layout=w.Layout(max_width="100%", height="auto"))
                                for png in self.figures.values()]
        df = results.to_frame(self.rows) if self.rows else None
        ui["table"].value = "" if df is None else df[[c for c in TABLE_COLUMNS if c in df]].to_html(
            index=False, float_format="%.4g", na_rep="-")
        kids = []
        for a in reversed(st["alerts"]):                      # newest first
            q = a.get("question")
            kids.append(w.HTML(f"<b>{a['kind']}</b> (evaluation {a['eval']}): {_esc(a['reason'])}"
                               + (f"<br>suggested: <i>{_esc(q['text'])}</i>" if q else "")))
            if q:
                b = w.Button(description=f"Ask {q['id']}", tooltip=q["text"])
                b.add_class("ks-ask-alert")
                b.on_click(lambda _, q=q: self._call(self.ask, q["id"], q["moment"]))
                kids.append(b)
        ui["alerts"].children = kids or [w.HTML("<i>no trigger has fired</i>")]

    def _render_bank(self) -> None:
        import ipywidgets as w
        by_id = {e.id: e for e in self.entries}
        shown = self.state["shown"]
        rows = []
        for qid in shown[:MAX_SHOWN]:
            e = by_id[qid]
            b = w.Button(description="Ask", tooltip=f"ask {qid}", layout=w.Layout(width="70px"))
            b.add_class("ks-ask")
            b.add_class(f"ks-ask-{qid}")
            b.on_click(lambda _, qid=qid: self._call(self.ask, qid))
            text = w.HTML(f"<code>{qid}</code> <small>[{_esc(e.group)}]</small> {_esc(bank.fill(e.text, self.slots))}")
            rows.append(w.HBox([b, text], layout=w.Layout(flex="0 0 auto", align_items="center")))
        self._ui["bank"].children = rows
        more = f" (first {MAX_SHOWN} listed)" if len(shown) > MAX_SHOWN else ""
        self._ui["count"].value = f"<span class='ks-count-text'>{len(shown)} question(s){more}</span>"


def _esc(s) -> str:
    import html
    return html.escape(str(s))
