"""The tables of bench/README.md, made from the latest results files in bench/results/.

    python -m bench.tables            # rewrite the README's section between the markers
    python -m bench.tables --check    # exit 1 when the section is not what the files give

Reads ``latest.json`` (bench.run; required) and, when present, ``policies-<db>-latest.json``,
``ranking-{engine,graph-page,import}-<db>-latest.json``, ``browser-latest.json`` and
``pages-<db>-latest.json``, and writes medians, ratios and whether each target is met between
``<!-- tables:start -->`` and ``<!-- tables:end -->``. Nothing else of the README is touched,
and the output depends on the files alone, so tests/test_bench_tables.py can check that the
committed README says what the committed results say.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"
START, END = "<!-- tables:start -->", "<!-- tables:end -->"
DBS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}

# Targets the results files do not carry (bench.run's files carry its timing targets as targets_ms).
IMPORT_TARGET_S = 120
PEAK_RSS_TARGET_MB = 1500
NAIVE_TARGET_X = 100      # at least this many times faster than the naive reference
FLOOR_TARGET_X = 2.0      # at most this many times the bare numpy pass
POSTGRES_TARGET_X = 2.0   # PostgreSQL's medians at most this many times SQLite's
RANKED_TARGET_MS, GRAPH_TARGET_MS, VECTOR_IMPORT_TARGET_X, GRAPH_PAGE_TARGET_S = 100, 150, 1.5, 3.0
PAGE_TARGET_S, RECORDS_FIRST_TARGET_S, FIRST_PAGE_TARGET_S = 1.0, 1.5, 3.0
POLICY_TARGETS_S = {"check": 10.0, "snapshot": 30.0}


class ResultsError(Exception):
    """A results file or the README is missing or not in the shape this generator reads."""


# ---------------------------------------------------------------------------------------------
# Numbers as the tables write them


def num(v: float) -> str:
    """About three significant figures: 1714, 178, 26.0, 1.7, 0.37."""
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.01 else f"{v:.3f}"


def dur(ms: float) -> str:
    return f"{num(ms / 1000)} s" if ms >= 1000 else f"{num(ms)} ms"


def secs(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{num(s)} s"


def stat_cell(st: dict[str, Any]) -> str:
    """Median / p95 (CPU median) for repeated timings; one figure and its CPU for a single run."""
    if st.get("runs", 2) == 1:
        return f"{dur(st['median_ms'])} ({dur(st['cpu_median_ms'])} CPU)"
    unit, scale = ("s", 1000) if st["median_ms"] >= 1000 else ("ms", 1)
    return (f"{num(st['median_ms'] / scale)} / {num(st['p95_ms'] / scale)} {unit} "
            f"({num(st['cpu_median_ms'] / scale)})")


def target_ms(ms: float) -> str:
    return f"≤ {ms / 1000:g} s" if ms >= 1000 else f"≤ {ms:g} ms"


def when(report: dict[str, Any]) -> str:
    """'2026-11-26 23:34-23:40 UTC' from a report's start (and end, when it has one)."""
    start = datetime.fromisoformat(report["started"])
    text = start.strftime("%Y-%m-%d %H:%M")
    if report.get("finished"):
        end = datetime.fromisoformat(report["finished"])
        text += "-" + end.strftime("%H:%M" if end.date() == start.date() else "%Y-%m-%d %H:%M")
    return text + " UTC"


def load(report: dict[str, Any]) -> str:
    machine = report.get("machine", {})
    start = machine.get("loadavg_start") or report.get("loadavg_start") or report.get("loadavg")
    end = machine.get("loadavg_end") or report.get("loadavg_end")
    if not start:
        return "load average not recorded"
    text = f"load average {start[0]:.1f} at the start"
    return text + (f", {end[0]:.1f} at the end" if end else "")


def run_line(report: dict[str, Any], name: str) -> str:
    return f"`{report['command']}`, {when(report)}, {load(report)} (`bench/results/{name}`)"


def met(fails: list[str]) -> str:
    return "yes" if not fails else "no: " + ", ".join(fails)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def size(n: int) -> str:
    for factor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{suffix}"
    return f"{n:,}"


# ---------------------------------------------------------------------------------------------
# Sections, one per benchmark

ENGINE_ROWS = [("retrieve", "retrieve"), ("retrieve_by_id", "retrieve_by_id"), ("explain", "explain"),
               ("reinforce + cache refresh", "reinforce"), ("metrics; its first call in a process", "metrics"),
               ("prune preview", "prune_preview"), ("cold open", "cold_open"),
               ("audit checkpoint", "audit_checkpoint"), ("verify_audit, whole store", "verify_audit")]


def engine(report: dict[str, Any], name: str) -> list[str]:
    targets = report["targets_ms"]
    out = ["### The engine (`bench.run`)", "",
           run_line(report, name) + ". Wall median / p95, CPU median of the measuring process in brackets; "
           "a single run gives its one figure and its CPU time.", ""]
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for r in report["results"]:
        by_size.setdefault(r["n"], {})[r["db"]] = r
    for n, runs in sorted(by_size.items()):
        dbs = [db for db in DBS if db in runs]
        rows = []
        for label, key in ENGINE_ROWS:
            cells, fails = [], []
            for db in dbs:
                e = runs[db]["engine"]
                cell = stat_cell(e[key])
                worst = e[key]["median_ms"]
                if key == "metrics":
                    cell += f"; first {dur(e['metrics_first']['median_ms'])}"
                    worst = max(worst, e["metrics_first"]["median_ms"])
                if key == "verify_audit" and e.get("verify_problems"):
                    cell += f"; {len(e['verify_problems'])} problems"
                    fails.append(DBS[db])
                elif worst > targets[key]:
                    fails.append(DBS[db])
                cells.append(cell)
            rows.append([label, target_ms(targets[key]), *cells, met(fails)])
        rows += _engine_extra(runs, dbs)
        out += table([f"{size(n)} records", "target", *(DBS[db] for db in dbs), "met"], rows)
        out += [""] + _engine_notes(runs, dbs)
    return out


def _engine_extra(runs: dict[str, dict[str, Any]], dbs: list[str]) -> list[list[str]]:
    rows = []
    imports = [runs[db]["generation"].get("import_s") for db in dbs]
    rows.append(["import (`workers=2`, vectors included)", f"< {IMPORT_TARGET_S // 60} min",
                 *(secs(s) if s is not None else "not in this run" for s in imports),
                 met([DBS[db] for db, s in zip(dbs, imports) if s is not None and s >= IMPORT_TARGET_S])])
    rss = [runs[db]["engine"]["peak_rss_mb"] for db in dbs]
    rows.append(["peak RSS", f"≤ {PEAK_RSS_TARGET_MB / 1000:g} GB", *(f"{v:.0f} MB" for v in rss),
                 met([DBS[db] for db, v in zip(dbs, rss) if v > PEAK_RSS_TARGET_MB])])
    naive = []
    for db in dbs:
        r = runs[db]
        naive.append(f"{r['naive_ratio']:.0f}x" + ("" if r["naive"]["agrees"] else ", answers differ"))
    rows.append(["vs naive reference", f"≥ {NAIVE_TARGET_X}x", *naive,
                 met([DBS[db] for db in dbs if runs[db]["naive_ratio"] < NAIVE_TARGET_X
                      or not runs[db]["naive"]["agrees"]])])
    floor = [f"{runs[db]['floor_ratio']:.2f}x (floor {dur(runs[db]['engine']['numpy_floor']['median_ms'])})"
             for db in dbs]
    rows.append(["vs numpy floor", f"≤ {FLOOR_TARGET_X:g}x", *floor,
                 met([DBS[db] for db in dbs if runs[db]["floor_ratio"] > FLOOR_TARGET_X])])
    if dbs == ["sqlite", "postgres"]:
        lite, pg = runs["sqlite"]["engine"], runs["postgres"]["engine"]
        ratios = {label: pg[key]["median_ms"] / lite[key]["median_ms"] for label, key in ENGINE_ROWS}
        ratios["metrics' first call"] = pg["metrics_first"]["median_ms"] / lite["metrics_first"]["median_ms"]
        over = {label: x for label, x in ratios.items() if x > POSTGRES_TARGET_X}
        within = max(x for label, x in ratios.items() if label not in over)
        cell = f"every median within {within:.1f}x"
        if over:
            cell += " but " + ", ".join(f"{label} {x:.1f}x" for label, x in over.items())
        rows.append(["PostgreSQL against SQLite", f"within {POSTGRES_TARGET_X:g}x", "", cell, met(list(over))])
    return rows


def _engine_notes(runs: dict[str, dict[str, Any]], dbs: list[str]) -> list[str]:
    made = []
    for db in dbs:
        gen = runs[db]["generation"]
        if gen.get("generated_at"):
            made.append(f"{DBS[db]} {when({'started': gen['generated_at']})}")
    agree = all(runs[db]["naive"]["agrees"] and runs[db]["engine"]["floor_agrees"] for db in dbs)
    verified = all(not runs[db]["engine"]["verify_problems"] for db in dbs)
    e = runs[dbs[0]]["engine"]
    notes = [f"The retrieve sees {e['selection_candidates']:,} selector candidates and returns "
             f"{e['retrieve_page']} records; the prune preview finds {e['prune_candidates']} candidates."]
    if made:
        notes.append("The import is the one that made each store (" + "; ".join(made) + ").")
    notes.append("Every answer agreed with the naive reference and the numpy floor." if agree
                 else "**The fast path and a yardstick disagreed** (see the results file).")
    notes.append("`verify_audit` found no problem." if verified else "**`verify_audit` reported problems.**")
    return [" ".join(notes), ""]


def policies(reports: dict[str, tuple[dict[str, Any], str]]) -> list[str]:
    out = ["### Policy checks (`bench.policies`)", ""]
    rows = []
    for db, (r, name) in reports.items():
        targets = r.get("targets_s", POLICY_TARGETS_S)
        check, snap = min(r["check_s"]), min(r["snapshot_s"])
        fails = [what for what, v in (("check", check), ("snapshot", snap)) if v > targets[what]]
        out.append(f"- {DBS[db]}: " + run_line(r, name))
        rows.append([f"{size(r['records'])}, {DBS[db]}", f"{check:.2f} s", f"{snap:.2f} s",
                     f"{r['snapshot_lines']:,} lines, {r['snapshot_mb']:g} MB", f"{r['cold_open_s']:g} s", met(fails)])
    r0 = next(iter(reports.values()))[0]
    t = r0.get("targets_s", POLICY_TARGETS_S)
    out += ["", f"Best of {len(r0['check_s'])} runs:", ""]
    out += table(["records", f"check ({r0['profiles']} x {r0['assertions']}), ≤ {t['check']:g} s",
                  f"snapshot ({r0['profiles']} profiles), ≤ {t['snapshot']:g} s", "snapshot size", "cold open", "met"],
                 rows)
    return out + [""]


def ranking(engines: dict[str, tuple[dict, str]], pages: dict[str, tuple[dict, str]],
            imports: dict[str, tuple[dict, str]]) -> list[str]:
    out = ["### Task-aware ranking (`bench.ranking`)", ""]
    if engines:
        out += [f"- {DBS[db]}: " + run_line(r, name) for db, (r, name) in engines.items()]
        runs = next(iter(engines.values()))[0]["retrieve_task"]["runs"]
        out += ["", f"Medians of {runs} requests, wall / p95 (CPU median):", ""]
        rows = [["target", f"≤ {RANKED_TARGET_MS} ms", "", f"≤ {GRAPH_TARGET_MS} ms", "", "", "", ""]]
        for db, (r, _) in engines.items():
            fails = [w for w, k, t in (("task", "retrieve_task", RANKED_TARGET_MS),
                                        ("graph", "retrieve_graph", GRAPH_TARGET_MS)) if r[k]["median_ms"] > t]
            unwarmed = r["first_ranked_retrieve_unwarmed"]
            rows.append([f"{DBS[db]}, {size(r['records'])}", stat_cell(r["retrieve_task"]),
                         stat_cell(r["retrieve_no_task"]), stat_cell(r["retrieve_graph"]),
                         f"{secs(unwarmed['s'])} ({secs(unwarmed['cpu_s'])} CPU)",
                         " / ".join(f"{r[k]['s']:.1f}" for k in ("warm_column_cache", "warm_vectors",
                                                                  "warm_entity_names")) + " s",
                         f"{r['peak_rss_mb']:.0f} MB", met(fails)])
        out += table(["", "retrieve with a task", "without a task", "retrieve_graph",
                      "first ranked request, unwarmed", "`warm()`: cache / vectors / entity names", "peak RSS",
                      "met"], rows)
        out += ["", " ".join(f"{DBS[db]}: the graph request finds {r['graph_nodes']} nodes and {r['graph_edges']} "
                             f"edges; after `warm()` the first ranked request takes "
                             f"{dur(r['first_ranked_retrieve']['s'] * 1000)}; the vectors take "
                             f"{r['vector_matrix_mb']:.0f} MB ({r['vector_dim']} dimensions, float32)."
                             for db, (r, _) in engines.items()), ""]
    if pages:
        out += [f"- {DBS[db]}: " + run_line(r, name) for db, (r, name) in pages.items()]
        out += ["", "The Graph page in Chromium: median of the visits after the first (a fresh session each), "
                "and the first visit after the server started:", ""]
        rows = []
        for db, (r, _) in pages.items():
            g = r["graph_page"]
            first = g["first_visit"]["total_s"]
            rows.append([DBS[db], secs(g["median_page_s"]), secs(g["median_task_s"]), secs(g["median_total_s"]),
                         secs(first), met([] if g["median_total_s"] <= GRAPH_PAGE_TARGET_S else ["in all"])])
        out += table(["Graph page", "open", "task typed to graph drawn", f"in all, ≤ {GRAPH_PAGE_TARGET_S:g} s",
                      "first visit after a start", "met"], rows)
        out.append("")
    if imports:
        out += [f"- {DBS[db]}: " + run_line(r, name) for db, (r, name) in imports.items()]
        out += ["", "One JSON Lines file imported into a new store with the default ranking provider, then "
                "without one; wall seconds (CPU of the importing process / of its workers):", ""]
        rows = []
        for db, (r, _) in imports.items():
            imp = r["import"]
            cells = [f"{secs(imp[k]['s'])} ({num(imp[k]['cpu_s'])} / {num(imp[k]['workers_cpu_s'])} s)"
                     for k in ("with_vectors", "without_vectors")]
            rows.append([f"{DBS[db]}, {size(imp['with_vectors']['records'])}", *cells,
                         f"{imp['ratio_wall']:.2f}x ({imp['ratio_cpu']:.2f}x CPU)",
                         met([] if imp["ratio_wall"] <= VECTOR_IMPORT_TARGET_X else ["ratio"])])
        out += table(["import", "with vectors", "without", f"ratio, ≤ {VECTOR_IMPORT_TARGET_X:g}x", "met"], rows)
        out.append("")
    return out


def browser(r: dict[str, Any], name: str) -> list[str]:
    target = r["target_ms"]
    how = "`membrane-console`" if r["launcher"] == "cli" else "`streamlit run`"
    if r.get("idle_s"):
        how += f", page opened {r['idle_s']:g} s after the start"
    fails = [phase for phase, ms in (("first visit", r["first_visit"]["ms"]), ("cold", r["cold"]["ms"]),
                                     ("warm", r["warm_stats"]["median_ms"]),
                                     ("uncached", r["uncached_stats"]["median_ms"])) if ms > target]
    out = ["### The trust simulator in a browser (`bench.browser`)", "",
           f"{DBS[_kind(r['db'])]}, {size(r['records'])} records: " + run_line(r, name) + ".", ""]
    out += table(["server", "first visit", "cold", "warm median / p95", "uncached median / p95",
                  f"≤ {target / 1000:g} s"],
                 [[how, dur(r["first_visit"]["ms"]), dur(r["cold"]["ms"]),
                   f"{num(r['warm_stats']['median_ms'] / 1000)} / {num(r['warm_stats']['p95_ms'] / 1000)} s",
                   f"{num(r['uncached_stats']['median_ms'] / 1000)} / {num(r['uncached_stats']['p95_ms'] / 1000)} s",
                   met(fails)]])
    fv = r["first_visit"]
    out += ["", f"The first visit's CPU: {dur(fv['browser_cpu_ms'])} of Chromium's against "
                f"{dur(fv['server_cpu_ms'])} of the console server's.", ""]
    return out


def pages(reports: dict[str, tuple[dict[str, Any], str]]) -> list[str]:
    out = ["### Every console page in a browser (`bench.pages`)", ""]
    out += [f"- {DBS[db]}, {size(r['records'])} records: " + run_line(r, name) for db, (r, name) in reports.items()]
    visits = min(len(next(iter(r["visits"].values()))) for r, _ in reports.values())
    later = f"visits 2-{visits}" if visits > 2 else ("visit 2" if visits == 2 else "the one visit")
    out += ["", f"Medians of {later}, wall seconds (console server CPU / Chromium CPU):", ""]
    order: list[str] = []
    for r, _ in reports.values():
        order += [p for p in r["pages"] if p not in order]
    header = ["page"] + [f"{DBS[db]}: {how}" for db in reports for how in ("sidebar", "fresh load")]
    rows = []
    for page in order:
        row = [page]
        for r, _ in reports.values():
            row += [_page_cell(r["navigations"].get(page)), _page_cell(r["visits"].get(page))]
        rows.append(row)
    out += table(header, rows) + [""]
    for db, (r, _) in reports.items():
        slow = [p for p in r["pages"] if _later(r["navigations"][p], "s") > PAGE_TARGET_S]
        records = r["navigations"]["records"][0]["s"] if "records" in r["navigations"] else None
        restart = r.get("restart_open")
        out.append(f"- {DBS[db]}: every page at most {PAGE_TARGET_S:g} s through the sidebar: "
                   + ("met" if not slow else "not met by " + ", ".join(slow))
                   + (f"; the record explorer's first visit {secs(records)} (≤ {RECORDS_FIRST_TARGET_S:g} s: "
                      f"{'met' if records <= RECORDS_FIRST_TARGET_S else 'not met'})" if records is not None else "")
                   + (f"; the first page after a restart {secs(restart['s'])} from the server's answer, "
                      f"{restart['from_start_s']:.1f} s from the start command (≤ {FIRST_PAGE_TARGET_S:g} s: "
                      f"{'met' if restart['s'] <= FIRST_PAGE_TARGET_S else 'not met'})" if restart else "")
                   + f"; the first page in a new browser profile {secs(r['cold_open']['s'])}.")
    return out + [""]


def _later(visits: list[dict[str, Any]], key: str) -> float:
    return statistics.median(v.get(key, 0) for v in (visits[1:] or visits))


def _page_cell(visits: list[dict[str, Any]] | None) -> str:
    if not visits:
        return ""
    return f"{_later(visits, 's'):.2f} ({_later(visits, 'server_cpu_s'):.2f} / {_later(visits, 'browser_cpu_s'):.2f})"


def _kind(url: str) -> str:
    return "postgres" if url.startswith("postgresql") else "sqlite"


# ---------------------------------------------------------------------------------------------
# Files


def read(results: Path, name: str, required: bool = False) -> dict[str, Any] | None:
    path = results / name
    if not path.exists():
        if required:
            raise ResultsError(f"{path} is missing: `python -m bench.run --sizes 1m --db both` writes it "
                               "(or restore the committed one with git)")
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path} is not JSON: {e}") from None


def _section(title: str, make: Callable[[], list[str]], files: list[str]) -> list[str]:
    try:
        return make()
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as e:
        raise ResultsError(f"{', '.join(files)}: not the shape of a {title} results file "
                           f"({type(e).__name__}: {e})") from None


def _missing(title: str, names: str, command: str) -> list[str]:
    return [f"### {title}", "", f"No results file ({names}): `{command}` writes it.", ""]


def render(results: Path = RESULTS) -> str:
    """The README's generated section, markers excluded, from the files in ``results``."""
    out = ["<!-- Made by `python -m bench.tables` from bench/results/: change those files or "
           "bench/tables.py, not these lines. -->", ""]
    report = read(results, "latest.json", required=True)
    out += _section("bench.run", lambda: engine(report, "latest.json"), ["latest.json"])

    def found(pattern: str) -> dict[str, tuple[dict[str, Any], str]]:
        got = {}
        for db in DBS:
            name = pattern.format(db=db)
            r = read(results, name)
            if r is not None:
                got[db] = (r, name)
        return got

    pol = found("policies-{db}-latest.json")
    out += (_section("bench.policies", lambda: policies(pol), [n for _, n in pol.values()]) if pol else
            _missing("Policy checks (`bench.policies`)", "`policies-sqlite-latest.json`",
                     "python -m bench.policies --n 1m"))
    eng, gp, imp = (found("ranking-engine-{db}-latest.json"), found("ranking-graph-page-{db}-latest.json"),
                    found("ranking-import-{db}-latest.json"))
    if eng or gp or imp:
        out += _section("bench.ranking", lambda: ranking(eng, gp, imp),
                        [n for part in (eng, gp, imp) for _, n in part.values()])
    else:
        out += _missing("Task-aware ranking (`bench.ranking`)", "`ranking-engine-sqlite-latest.json`",
                        "python -m bench.ranking --db URL")
    br = read(results, "browser-latest.json")
    out += (_section("bench.browser", lambda: browser(br, "browser-latest.json"), ["browser-latest.json"]) if br
            else _missing("The trust simulator in a browser (`bench.browser`)", "`browser-latest.json`",
                          "python -m bench.browser --db URL"))
    pg = found("pages-{db}-latest.json")
    out += (_section("bench.pages", lambda: pages(pg), [n for _, n in pg.values()]) if pg else
            _missing("Every console page in a browser (`bench.pages`)", "`pages-sqlite-latest.json`",
                     "python -m bench.pages --db URL"))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def split(text: str, where: Path = README) -> tuple[str, str, str]:
    """The README as (before the section, the section, after it), markers kept outside."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ResultsError(f"{where} needs one {START} line followed by one {END} line")
    head, rest = text.split(START, 1)
    body, tail = rest.split(END, 1)
    return head + START + "\n", body.lstrip("\n"), END + tail


def rewritten(text: str, section: str, where: Path = README) -> str:
    head, _, tail = split(text, where)
    return head + section + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the latest results files are")
    parser.add_argument("--readme", type=Path, default=README, help="the file whose marked section is rewritten")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the section differs")
    args = parser.parse_args(argv)
    try:
        text = args.readme.read_text()
        new = rewritten(text, render(args.results), args.readme)
    except (ResultsError, OSError) as e:
        print(f"bench.tables: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print(f"bench.tables: {args.readme} does not show {args.results}: run python -m bench.tables",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        args.readme.write_text(new)
        print(f"rewrote the tables of {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
