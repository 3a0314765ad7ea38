"""Consolidation proposals in the Review queue (SPEC 12): what Membrane's consolidators would
write over the records the operator's clearance sees in full, each proposal beside its sources;
applied one by one (Apply), all together (Apply all, confirmed) or rejected (Reject, with a
rationale: left out of every later run until its sources change); the history of runs; and the
admins' setting to apply proposals automatically.

Everything goes through the signed-in operator's view, which checks the role and the clearance
as stored at that moment: the dry run, each apply (planned again by the engine over the store as
it is then: a proposal whose sources changed is reported stale and not written), each rejection,
the history (counts and records within the clearance) and the setting. A dry run is made when
the operator asks for one (Find proposals) and kept in the session while the store does not
change, so other runs of the page never plan.

**Apply automatically** (the setting, kept by the engine): when it is on and a curator or admin
presses Find proposals, what that dry run finds is applied at once, as that operator, as Apply
all would without its confirmation; the page then shows what was applied and what the store
proposes next. Nothing is applied on a schedule, nor while nobody presses the button.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from membrane_engine import MAX_RATIONALE_LENGTH, OperatorView, format_time, label
from membrane_engine.errors import MembraneError

from .clearance import key_of
from .colours import CONSOLIDATION_BADGES, NO_BADGE
from .safe import clean, md
from .words import plural

TITLES = {"episodic": "episodic compression", "semantic": "semantic", "competence": "competence",
          "plangraph": "plan graph"}
VERBS = {"created": "Create", "reinforced": "Reinforce", "compressed": "Compress"}
ALL = "all"
PER_PAGE = 10
SHOWN_SOURCES = 6
LINKS = ("subject_entity", "object_entity", "uses")  # a new record's relations that name entities
HISTORY = 50


def _when(value: Any) -> str:
    return format_time(value)[:16].replace("T", " ") if value is not None else ""


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {a}" for a, n in counts.items() if n) or "nothing"


def _said(done: Any, what: str) -> tuple[bool, str]:
    """An applied run in words: what it wrote and what it left stale."""
    counts = {"created": len(done.created), "reinforced": len(done.reinforced), "compressed": len(done.compressed)}
    parts = []
    if done.items:
        parts.append(f"{what}: {_counts(counts)} (run {done.run}).")
    if done.stale:
        parts.append(f"{plural(len(done.stale), 'proposal')} had changed since they were shown (their sources, "
                     "or applied or rejected meanwhile) and {} not applied: look at the proposals again."
                     .format("was" if len(done.stale) == 1 else "were"))
    if not parts:
        parts.append(f"{what}: nothing to write.")
    return bool(done.items) or not done.stale, " ".join(parts)


class Section:
    """The Consolidation section of one page run."""

    def __init__(self, view: OperatorView, operator: Any, key: Callable[..., str]):
        self.view, self.operator, self.key = view, operator, key
        self.may, self.why = view.may("consolidate")

    # -------------------------------------------------------------------- state

    def _generation(self) -> int:
        return int(st.session_state.get(self.key("cons_gen"), 0))

    def _wrote(self, outcome: tuple[bool, str]) -> None:
        """After a write: say what happened on the next run, and plan anew (a rejection changes no
        record, so the store's state alone would not tell)."""
        st.session_state[self.key("cons_outcome")] = outcome
        st.session_state[self.key("cons_gen")] = self._generation() + 1
        st.rerun()

    def dry_run(self) -> Any:
        """The view's dry run, kept per store state, operator, clearance, minute and own writes."""
        view = self.view
        stamp = (view.state(), view.name, key_of(self.operator.clearance), self._generation(),
                 view.now().replace(second=0, microsecond=0).isoformat())
        kept = st.session_state.get(self.key("cons_report"))
        if kept is not None and kept[0] == stamp:
            return kept[1]
        report = view.consolidate(dry_run=True)
        st.session_state[self.key("cons_report")] = (stamp, report)
        return report

    # -------------------------------------------------------------------- writes

    def apply(self, keys: list[str], what: str) -> None:
        try:  # the engine plans again under the write locks; the role and clearance as stored now
            done = self.view.consolidate(only=keys)
        except MembraneError as exc:
            self._wrote((False, f"{what} refused: {exc}"))
        else:
            self._wrote(_said(done, what))

    def reject(self, key: str, rationale: str) -> None:
        try:
            out = self.view.reject_consolidation([key], rationale)
        except MembraneError as exc:
            self._wrote((False, f"Reject refused: {exc}"))
        else:
            if out.rejected:
                outcome = (True, "Rejected: the proposal is left out of every later run until its sources change.")
            else:
                outcome = (False, "Not rejected: the proposal had changed since it was shown (its sources, or "
                                  "applied or rejected meanwhile). Look at the proposals again.")
            self._wrote(outcome)

    # -------------------------------------------------------------------- drawing

    def draw(self) -> None:
        st.header("Consolidation")
        st.caption("What Membrane's consolidators (episodic compression, semantic, competence, plan graph) would "
                   "write over the records your clearance sees in full: each proposal beside its sources. Nothing "
                   "is written until you apply; Apply plans again against the store as it is then, and a proposal "
                   "whose sources changed since is reported stale, not applied.")
        self.setting()
        last = st.session_state.pop(self.key("cons_outcome"), None)
        if last:
            ok, line = last
            (st.success if ok else st.error)(md(line, 1500))
        looked = bool(st.session_state.get(self.key("cons_on")))
        find = st.button("Look again" if looked else "Find proposals", type="primary", key=self.key("cons_find"),
                         disabled=not self.may, help=None if self.may else self.why)
        if not self.may:
            st.info(f"Consolidation needs the curator role; {md(self.operator.name, 80)} is a "
                    f"{self.operator.role.value}. Proposals are planned, applied and rejected by curators and admins; "
                    "the history below is yours to read.", icon=":material/lock:")
        if find:
            st.session_state[self.key("cons_on")] = True
            st.session_state[self.key("cons_gen")] = self._generation() + 1  # a fresh plan, asked for
        if st.session_state.get(self.key("cons_on")) and (self.may or find):
            try:
                report = self.dry_run()
            except MembraneError as exc:
                st.error(f"The engine refuses: {md(str(exc), 1500)}")
            else:
                if find and report.proposals and self.auto.on:
                    self.apply([p.key for p in report.proposals], "Applied automatically")
                self.proposals(report)
        self.history()

    def setting(self) -> None:
        self.auto = auto = self.view.consolidation_auto_apply()
        admin, why = self.view.may("configure_consolidation")
        who = f" (set by {auto.actor}, {_when(auto.at)})" if auto.actor else ""
        cols = st.columns([4, 1])
        cols[0].caption(f"Apply automatically: **{'on' if auto.on else 'off'}**{md(who, 200)}. When on, pressing "
                        "Find proposals applies everything it finds at once, as you, without a review; nothing is "
                        "applied on a schedule.")
        pressed = cols[1].button("Turn off" if auto.on else "Turn on", key=self.key("cons_auto"), disabled=not admin,
                                 help="Admins set this" if not admin else None)
        if pressed:
            try:  # an admin's, as stored now: a forged press by anyone else is refused here
                done = self.view.set_consolidation_auto_apply(not auto.on)
            except MembraneError as exc:
                self._wrote((False, f"Setting refused: {exc}"))
            else:
                self._wrote((True, f"Apply automatically is now {'on' if done.on else 'off'}."))

    def proposals(self, report: Any) -> None:
        proposals = report.proposals
        kinds = [k for k in TITLES if any(p.consolidator == k for p in proposals)]
        st.subheader(f"Proposals ({len(proposals):,})")
        by_action = {a: sum(1 for p in proposals if p.action == a) for a in VERBS}
        note = f" {plural(report.rejected, 'rejected proposal')} left out." if report.rejected else ""
        st.caption(f"Planned as of {_when(report.as_of)} UTC: {by_action['created']:,} to create, "
                   f"{by_action['reinforced']:,} to reinforce, {by_action['compressed']:,} to compress.{note} "
                   "As in Membrane, a known fact or skill is reinforced by its episodes at every run, so its "
                   "reinforcement is proposed again after it is applied, until it is rejected.")
        if not proposals:
            st.info("Nothing to consolidate within your clearance.", icon=":material/task_alt:")
            return
        options = [ALL, *kinds]
        if st.session_state.get(self.key("cons_kind")) not in options:  # a value the page never offered
            st.session_state[self.key("cons_kind")] = ALL
        top = st.columns([2, 3])
        kind = top[0].selectbox("Consolidator", options, key=self.key("cons_kind"),
                                format_func=lambda k: "all" if k == ALL else TITLES[k])
        rationale = top[1].text_input("Rationale for a rejection", key=self.key("cons_why"),
                                      max_chars=MAX_RATIONALE_LENGTH, disabled=not self.may,
                                      placeholder="Why a proposal is wrong: the rejection's audit entry").strip()
        shown = [p for p in proposals if kind == ALL or p.consolidator == kind]
        pages = max(1, -(-len(shown) // PER_PAGE))
        page_no = min(max(int(st.session_state.get(self.key("cons_page"), 1) or 1), 1), pages)
        first = (page_no - 1) * PER_PAGE
        page = shown[first:first + PER_PAGE]
        names, briefs = self._lookups(page)
        for p in page:
            self.card(p, names, briefs, rationale)
        if pages > 1:
            st.pagination(pages, key=self.key("cons_page"), default=page_no)
        self.apply_all(proposals)

    def apply_all(self, proposals: list[Any]) -> None:
        keys = [p.key for p in proposals]
        digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:12]
        with st.container(border=True):
            # Keyed by the very list: a confirmation never carries over to another set of proposals.
            confirmed = st.checkbox(f"I confirm: apply all {plural(len(keys), 'proposal')} of this dry run, every "
                                    "consolidator (not only the ones shown), as one run.",
                                    key=self.key("cons_confirm", digest),
                                    disabled=not self.may)
            if st.button(f"Apply all {len(keys):,}", key=self.key("cons_all", digest), disabled=not (confirmed and self.may)):
                self.apply(keys, "Applied all")

    def _lookups(self, page: list[Any]) -> tuple[dict[str, str], dict[str, Any]]:
        """Names and labels of the records the page names (sources, targets, entities), as the
        view gives them now: names of what the clearance sees, labels of what it sees in full."""
        ids: list[str] = []
        for p in page:
            ids += list(p.sources[:SHOWN_SOURCES])
            if p.action == "created":
                ids += [r.target_id for r in p.record.relations if r.predicate in LINKS]
            else:
                ids.append(p.record_id)
        ids = list(dict.fromkeys(ids))
        return (self.view.labels(ids), self.view.briefs(ids)) if ids else ({}, {})

    def _record_line(self, rid: str, names: dict[str, str], briefs: dict[str, Any]) -> str:
        brief = briefs.get(rid)
        if brief is not None:
            scope = brief.scope or "(unscoped)"
            return f"{clean(names.get(rid, rid), 120)}  [{clean(rid, 80)}] · {brief.type} · {brief.sensitivity} · {clean(scope, 60)}"
        if rid in names:  # seen redacted since the plan: metadata only
            try:
                seen = self.view.get(rid)
            except MembraneError:
                return f"{clean(names[rid], 120)}  [{clean(rid, 80)}] (metadata only)"
            scope = seen.scope or "(unscoped)"
            return (f"{clean(names[rid], 120)}  [{clean(rid, 80)}] · {seen.type.value} · {seen.sensitivity.value} · "
                    f"{clean(scope, 60)} (redacted: metadata only)")
        return f"[{clean(rid, 80)}] (no longer within your clearance)"

    def card(self, p: Any, names: dict[str, str], briefs: dict[str, Any], rationale: str) -> None:
        with st.container(border=True):
            left, mid, right = st.columns([5, 5, 2])
            with left:
                st.badge(f"{VERBS[p.action]} · {TITLES[p.consolidator]}",
                         color=CONSOLIDATION_BADGES.get(p.action, NO_BADGE))
                if p.action == "created":
                    record = p.record
                    st.text(clean(label(record), 300))
                    scope = md(record.scope, 80) if record.scope else "(unscoped)"
                    st.caption(f"new {record.type.value} · {record.sensitivity.value} · {scope} · confidence "
                               f"{record.confidence:.2f} · tags {md(', '.join(record.tags), 160) or 'none'}")
                    linked = [r.target_id for r in record.relations if r.predicate in LINKS]
                    if linked:
                        st.caption("names " + "; ".join(md(names.get(t, t), 80) for t in dict.fromkeys(linked)))
                    if len(p.items) > 1:
                        st.caption(f"and reinforced in the same run by {plural(len(p.items) - 1, 'more episode event')}")
                else:
                    st.text(self._record_line(p.record_id, names, briefs))
                    if p.salience_before is not None:
                        st.caption(f"salience {p.salience_before:.3f} → {p.salience_after:.3f}")
                st.caption(md(p.rationale, 300))
            with mid:
                if p.action == "compressed":
                    st.caption("The episode itself: a day old or more, not pinned, above the 0.05 floor")
                else:
                    st.caption(f"From {plural(len(p.sources), 'source')}")
                    lines = [self._record_line(s, names, briefs) for s in p.sources[:SHOWN_SOURCES]]
                    if len(p.sources) > SHOWN_SOURCES:
                        lines.append(f"+ {len(p.sources) - SHOWN_SOURCES:,} more")
                    st.text("\n".join(lines))
            with right:
                if st.button("Apply", key=self.key("cons_apply", p.key), type="primary", disabled=not self.may,
                             help=None if self.may else self.why):
                    self.apply([p.key], "Applied")
                if st.button("Reject", key=self.key("cons_reject", p.key), disabled=not (self.may and rationale),
                             help=(self.why if not self.may else None if rationale
                                   else "Write a rationale for the rejection first")):
                    self.reject(p.key, rationale)

    def history(self) -> None:
        st.subheader("History")
        try:
            events = self.view.consolidation_history(limit=HISTORY)
        except MembraneError as exc:
            st.error(f"The engine refuses: {md(str(exc), 500)}")
            return
        if not events:
            st.caption("No consolidation run, rejection or setting within your clearance yet.")
            return
        rows = []
        for e in events:
            if e.kind == "run":
                parts = "; ".join(f"{TITLES.get(k, k)} {_counts(c)}" for k, c in e.by_consolidator.items() if any(c.values()))
                what = f"{'chosen proposals' if e.selected else 'whole run'}: {parts}"
            elif e.kind == "rejected":
                what = f"rejected {plural(e.counts.get('rejected', 0), 'proposal')}" + (
                    f": {e.rationale}" if e.rationale else "")
            else:
                what = f"apply automatically turned {'on' if e.auto_apply else 'off'}"
            rows.append({"when (UTC)": _when(e.at), "who": clean(", ".join(e.actors), 200), "what": clean(what, 400),
                         "records": clean(", ".join(i.record_id for i in e.items[:3]) +
                                          (f" (+{len(e.items) - 3})" if len(e.items) > 3 else ""), 300),
                         "run": clean(e.run or "", 40)})
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=self.key("cons_history"),
                     column_config={"what": st.column_config.TextColumn(width="large")})
        st.caption("Counts and records within your clearance; runs, rejections and settings are entries on the "
                   "store's own audit log.")


def consolidation_section(view: OperatorView, operator: Any, key: Callable[..., str]) -> None:
    """Draw the Consolidation section for the signed-in operator (``key``: the page's keys)."""
    Section(view, operator, key).draw()


__all__ = ["consolidation_section"]
