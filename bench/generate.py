"""Deterministic generator of realistic Membrane stores, written through the engine's import.

    python -m bench.generate --n 1000000 --db sqlite:////tmp/m1.db

Records come in blocks of ``BLOCK`` whose random stream depends only on (seed, block number),
so the same seed and N always give the same store. The records are written to a JSON Lines file
(side processes generate blocks), which is then imported with the engine's own file import,
``Membrane.import_file(..., workers=<cores>)``: one transaction, worker processes validating
chunks of lines while this one writes them (``membrane_engine/storage/jsonl_import.py``).

What a store looks like (proportions are per record, drawn independently):
- types: episodic 44%, semantic 24%, competence 9%, entity 8%, working 8%, plan_graph 7%
- sensitivity: public 22%, low 36%, medium 26%, high 12%, hyper 4%
- scope: unscoped 18%, else one of 40 scopes with Zipf-like popularity
- decay: mostly exponential, linear for ~15%, custom (one of four piecewise profiles) for ~1%;
  half-lives by type (working: hours, episodic: days, semantic/plans: months, competence and
  entities: a year or two); some semantic/competence records have a salience floor; ~2% pinned
- created over the year before ``NOW``, denser towards recent; ~30% carry the anchor extension
  fields (as if exported from this engine), the rest anchor at (salience, updated_at)
- ~30% relate to 1-2 earlier records; 1-4 audit entries each (create, then reinforce / revise /
  decay / fork / merge); 1-2 provenance sources; payloads of the type's shape with short texts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import orjson

UTC = timezone.utc
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the generated stores' "now"; benchmarks ask as of it
NOW_EPOCH = int(NOW.timestamp())
DAY = 86400
HOUR = 3600
SPAN = 365 * DAY
BLOCK = 10_000
DEFAULT_SEED = 42

TYPES = (("episodic", 44), ("semantic", 24), ("competence", 9), ("entity", 8), ("working", 8), ("plan_graph", 7))
SENSITIVITIES = (("public", 22), ("low", 36), ("medium", 26), ("high", 12), ("hyper", 4))
SCOPE_NAMES = (
    ["project-alpha", "project-beta", "project-gamma", "project-delta", "team-infra", "team-data",
     "team-security", "customer-acme", "customer-globex", "customer-initech"]
    + [f"project-{w}" for w in ("orion", "vega", "lyra", "draco", "cygnus", "perseus", "hydra", "aquila",
                                "carina", "corvus", "lupus", "pavo", "tucana", "volans", "indus")]
    + [f"user-{k:03d}" for k in range(15)]
)
UNSCOPED_SHARE = 0.18
# Two of the busier scopes: what the benchmark's trust context asks for.
BENCH_SCOPES = ("project-alpha", "project-beta")
CUSTOM_PROFILES = (
    [[0, 1], [3600, 0.9], [86400, 0.5], [604800, 0.1]],
    [[0, 1], [86400, 1], [172800, 0.3]],
    [[0, 1], [604800, 0.8], [2592000, 0.4], [7776000, 0.05]],
    [[0, 1], [43200, 0.6], [259200, 0.6], [1209600, 0.0]],
)
WORDS = (
    "deploy build test cache index query schema migrate rollback release branch merge review lint "
    "token config secret vault cluster node pod service gateway proxy queue worker cron backup "
    "restore snapshot replica shard latency timeout retry budget quota alert metric trace log "
    "incident outage postmortem runbook oncall ticket customer invoice report dashboard export "
    "import parser encoder model prompt embedding vector search ranking filter policy audit trust "
    "scope tenant user session cookie header payload webhook callback pipeline artifact package "
    "version upgrade patch hotfix feature flag experiment rollout canary region zone network dns "
    "certificate renewal storage bucket object upload download stream batch job scheduler"
).split()
TOOLS = ("bash", "git", "pytest", "kubectl", "terraform", "psql", "curl", "docker", "make", "npm", "pip", "jq")
OSES = (("linux", "6.8"), ("linux", "6.1"), ("darwin", "14.5"), ("windows", "11"))
PREDICATES = ("derived_from", "supports", "mentions", "about", "follows", "contradicts", "part_of")
SEM_PREDICATES = ("uses", "version", "owned_by", "depends_on", "located_in", "prefers", "runs_on", "limit")
ACTOR = "bench.generate"  # who the import is by (records carry their own audit logs)
ACTORS = ("agent-1", "agent-2", "agent-planner", "agent-coder", "curator", "ops-bot", "alice", "bob")
TAGS = ("infra", "billing", "auth", "perf", "bug", "customer", "release", "oncall", "data", "ml",
        "docs", "security", "ui", "api", "db")


def record_id(seed: int, index: int) -> str:
    """The id of record ``index`` (a UUID derived from seed and index, so relations can point back)."""
    # str(uuid.UUID(bytes=digest, version=4)), without building the UUID object
    value = int.from_bytes(hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=16).digest(), "big")
    h = "%032x" % ((value & _UUID_CLEAR) | _UUID_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_UUID_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))  # variant and version bits
_UUID_SET = (0x8000 << 48) | (4 << 76)
_DAY_TEXT: dict[int, str] = {}
_CLOCK_TEXT = [f"T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z" for s in range(DAY)]


def _iso(epoch: float) -> str:
    """``time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))``, from two lookups."""
    days, seconds = divmod(int(epoch), DAY)
    day = _DAY_TEXT.get(days)
    if day is None:
        day = _DAY_TEXT[days] = time.strftime("%Y-%m-%d", time.gmtime(days * DAY))
    return day + _CLOCK_TEXT[seconds]


def _cumulative(pairs) -> tuple[list[str], list[float]]:
    names, weights = zip(*pairs)
    total = float(sum(weights))
    acc, out = 0.0, []
    for w in weights:
        acc += w / total
        out.append(acc)
    return list(names), out


_TYPE_NAMES, _TYPE_CUM = _cumulative(TYPES)
_SENS_NAMES, _SENS_CUM = _cumulative(SENSITIVITIES)
_SCOPE_NAMES, _SCOPE_CUM = _cumulative([(s, 1.0 / (k + 1) ** 0.9) for k, s in enumerate(SCOPE_NAMES)])


def _pick(rng: random.Random, names: list[str], cum: list[float]) -> str:
    u = rng.random()
    for name, c in zip(names, cum):
        if u < c:
            return name
    return names[-1]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


def _payload(rng: random.Random, type_: str, created: int, index: int) -> dict[str, Any]:
    if type_ == "episodic":
        steps = rng.randint(2, 6)
        t = created
        timeline = []
        for k in range(steps):
            t += rng.randint(1, 600)
            timeline.append({"t": _iso(t), "event_kind": rng.choice(("tool_call", "message", "observation", "error")),
                             "ref": f"evt-{index}-{k}", "summary": _text(rng, 4, 12)})
        tool_graph = []
        for k in range(rng.randint(0, 3)):
            tool_graph.append({"id": f"call-{k}", "tool": rng.choice(TOOLS),
                               "args": {"target": rng.choice(WORDS), "verbose": rng.random() < 0.3},
                               "result": rng.choice(("ok", "exit 1", {"rows": rng.randint(0, 500)})),
                               "timestamp": _iso(created + 60 * k), "depends_on": [f"call-{k - 1}"] if k else []})
        os_name, os_version = rng.choice(OSES)
        return {"kind": "episodic", "timeline": timeline, "tool_graph": tool_graph,
                "environment": {"os": os_name, "os_version": os_version,
                                "tool_versions": {rng.choice(TOOLS): f"{rng.randint(1, 9)}.{rng.randint(0, 30)}"},
                                "working_directory": f"/srv/{rng.choice(WORDS)}", "context": {}},
                "outcome": rng.choice(("success", "success", "success", "failure", "partial")),
                "artifacts": [f"artifact://{rng.choice(WORDS)}/{index}"] if rng.random() < 0.4 else [],
                "tool_graph_ref": ""}
    if type_ == "working":
        return {"kind": "working", "thread_id": f"thread-{rng.randint(1, 5000)}",
                "state": rng.choice(("planning", "executing", "executing", "blocked", "waiting", "done")),
                "active_constraints": [{"type": "limit", "key": rng.choice(WORDS), "value": rng.randint(1, 100),
                                        "required": rng.random() < 0.5} for _ in range(rng.randint(0, 2))],
                "next_actions": [_text(rng, 3, 7) for _ in range(rng.randint(1, 3))],
                "open_questions": [_text(rng, 4, 9) + "?" for _ in range(rng.randint(0, 2))],
                "context_summary": _text(rng, 10, 25)}
    if type_ == "semantic":
        u = rng.random()
        status = "active" if u < 0.9 else ("contested" if u < 0.96 else "retracted")
        return {"kind": "semantic", "subject": rng.choice(WORDS), "predicate": rng.choice(SEM_PREDICATES),
                "object": rng.choice((rng.choice(WORDS), rng.randint(1, 1000), f"{rng.randint(1, 20)}.{rng.randint(0, 9)}")),
                "validity": {"mode": rng.choice(("global", "global", "global", "conditional", "timeboxed"))},
                "evidence": [{"source_type": rng.choice(("episodic", "document", "user")),
                              "source_id": f"src-{rng.randint(1, 10**6)}", "timestamp": _iso(created)}
                             for _ in range(rng.randint(1, 2))],
                "revision_policy": rng.choice(("replace", "append", "")),
                "revision": {"status": status}}
    if type_ == "competence":
        successes = rng.randint(0, 200) if rng.random() < 0.85 else 0
        failures = rng.randint(0, max(1, successes // 3)) if successes else rng.randint(0, 3)
        performance = None
        if rng.random() < 0.9:
            total = successes + failures
            performance = {"success_count": successes, "failure_count": failures,
                           "success_rate": successes / total if total else 0.0,
                           "avg_latency_ms": round(rng.uniform(20, 5000), 1),
                           "last_used_at": _iso(created + rng.randint(0, 30 * DAY))}
        return {"kind": "competence", "skill_name": f"{rng.choice(WORDS)}-{rng.choice(WORDS)}",
                "triggers": [{"signal": _text(rng, 2, 4), "conditions": {"env": rng.choice(("prod", "staging", "dev"))}}],
                "recipe": [{"step": _text(rng, 3, 8), "tool": rng.choice(TOOLS), "args_schema": {"type": "object"},
                            "validation": "exit 0"} for _ in range(rng.randint(2, 5))],
                "required_tools": rng.sample(TOOLS, rng.randint(1, 3)),
                "failure_modes": [_text(rng, 3, 6) for _ in range(rng.randint(0, 2))],
                "fallbacks": [_text(rng, 3, 6) for _ in range(rng.randint(0, 1))],
                "performance": performance, "version": f"{rng.randint(1, 4)}.{rng.randint(0, 9)}"}
    if type_ == "plan_graph":
        n_nodes = rng.randint(3, 6)
        nodes = [{"id": f"n{k}", "op": rng.choice(WORDS), "params": {"retries": rng.randint(0, 3)}, "guards": None}
                 for k in range(n_nodes)]
        edges = [{"from": f"n{k}", "to": f"n{k + 1}", "kind": rng.choice(("data", "control"))} for k in range(n_nodes - 1)]
        metrics = None
        if rng.random() < 0.85:
            runs = rng.randint(0, 400)
            metrics = {"avg_latency_ms": round(rng.uniform(100, 60000), 1),
                       "failure_rate": round(rng.uniform(0, 0.5), 3) if runs else 0.0, "execution_count": runs,
                       "last_executed_at": _iso(created + rng.randint(0, 60 * DAY))}
        return {"kind": "plan_graph", "plan_id": f"plan-{rng.randint(1, 20000)}", "version": str(rng.randint(1, 5)),
                "intent": _text(rng, 4, 10), "constraints": {"max_minutes": rng.randint(5, 120)},
                "inputs_schema": {"type": "object"}, "outputs_schema": {"type": "object"},
                "nodes": nodes, "edges": edges, "metrics": metrics}
    name = rng.choice(WORDS).title() + rng.choice(("DB", "Service", "Corp", "Cluster", "API", ""))
    return {"kind": "entity", "canonical_name": name, "primary_type": rng.choice(("service", "org", "person", "database", "tool")),
            "types": [rng.choice(("service", "org", "system"))], "aliases": [name.lower()],
            "identifiers": [{"namespace": "internal", "value": f"ent-{index}"}], "summary": _text(rng, 6, 16)}


# Per type: (half-life range in seconds, linear share, salience floor (share, lo, hi), policies)
_DECAY = {
    "working": ((6 * HOUR, 3 * DAY), 0.25, (0.0, 0.0, 0.0), ("auto_prune",)),
    "episodic": ((1 * DAY, 21 * DAY), 0.15, (0.05, 0.01, 0.05), ("auto_prune", "auto_prune", "manual_only")),
    "semantic": ((30 * DAY, 365 * DAY), 0.10, (0.4, 0.05, 0.3), ("auto_prune", "manual_only", "never")),
    "competence": ((60 * DAY, 730 * DAY), 0.05, (0.5, 0.1, 0.3), ("manual_only", "never")),
    "plan_graph": ((30 * DAY, 365 * DAY), 0.10, (0.3, 0.05, 0.2), ("auto_prune", "manual_only")),
    "entity": ((180 * DAY, 730 * DAY), 0.05, (0.3, 0.1, 0.25), ("manual_only", "never")),
}


PRUNED_BEFORE = NOW_EPOCH - HOUR  # the store was last pruned (hourly sweep) an hour before NOW
_PRUNE_THRESHOLD = 0.001


def _salience(doc: dict[str, Any], t: float) -> float:
    """S(t) of a generated record (SPEC 2), to leave out what an earlier prune took."""
    lc = doc["lifecycle"]
    decay = lc["decay"]
    s_a, a = doc["_anchor"]
    if lc["pinned"]:
        return s_a
    if decay["max_age_seconds"] and t - doc["_created"] >= decay["max_age_seconds"]:
        return 0.0
    floor = decay["min_salience"]
    if s_a <= floor:
        return s_a
    delta, h = max(0.0, t - a), decay["half_life_seconds"]
    if decay["curve"] == "linear":
        f = max(0.0, 1.0 - delta / (2 * h))
    elif decay["curve"] == "custom":
        pts = decay["points"]
        f = pts[-1][1]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if delta <= x1:
                f = y0 + (y1 - y0) * (delta - x0) / (x1 - x0)
                break
    else:
        f = 2.0 ** (-delta / h)
    return max(s_a * f, floor)


def make_record(rng: random.Random, seed: int, index: int) -> dict[str, Any]:
    """Record ``index``: drawn until it is one an hourly prune would have left in the store."""
    while True:
        doc = _draw(rng, seed, index)
        lc = doc["lifecycle"]
        keep = lc["pinned"] or lc["deletion_policy"] != "auto_prune" or _salience(doc, PRUNED_BEFORE) >= _PRUNE_THRESHOLD
        del doc["_created"], doc["_anchor"]
        if keep:
            return doc


def _draw(rng: random.Random, seed: int, index: int) -> dict[str, Any]:
    type_ = _pick(rng, _TYPE_NAMES, _TYPE_CUM)
    sensitivity = _pick(rng, _SENS_NAMES, _SENS_CUM)
    scope = "" if rng.random() < UNSCOPED_SHARE else _pick(rng, _SCOPE_NAMES, _SCOPE_CUM)
    age = int(SPAN * rng.random() ** 2)  # denser towards NOW
    created = NOW_EPOCH - age - rng.randint(60, 3600)
    updated = min(NOW_EPOCH, created + (rng.randint(0, age) if rng.random() < 0.3 else 0))
    (h_lo, h_hi), linear_share, (floor_share, floor_lo, floor_hi), policies = _DECAY[type_]
    u = rng.random()
    decay: dict[str, Any] = {
        "curve": "custom" if u < 0.01 else ("linear" if u < 0.01 + linear_share else "exponential"),
        "half_life_seconds": rng.randint(h_lo, h_hi),
        "min_salience": round(rng.uniform(floor_lo, floor_hi), 3) if rng.random() < floor_share else 0.0,
        "max_age_seconds": 30 * DAY if type_ == "working" and rng.random() < 0.3 else 0,
        "reinforcement_gain": rng.choice((0.05, 0.1, 0.1, 0.2)),
    }
    if decay["curve"] == "custom":
        decay["points"] = rng.choice(CUSTOM_PROFILES)

    # Audit history: create, then up to three later operations.
    actor = rng.choice(ACTORS)
    audit = [{"action": "create", "actor": actor, "timestamp": _iso(created), "rationale": "observed during " + _text(rng, 2, 4)}]
    t = created
    last_reinforced = None
    for _ in range(rng.choices((0, 1, 2, 3), weights=(45, 30, 15, 10))[0]):
        t = min(NOW_EPOCH, t + rng.randint(HOUR, max(HOUR + 1, (NOW_EPOCH - t) // 2 + 1)))
        action = rng.choices(("reinforce", "revise", "decay", "fork", "merge"), weights=(50, 25, 15, 5, 5))[0]
        audit.append({"action": action, "actor": rng.choice(ACTORS), "timestamp": _iso(t),
                      "rationale": f"{action}: " + _text(rng, 2, 6)})
        if action == "reinforce":
            last_reinforced = t
    if last_reinforced is not None:
        updated = max(updated, last_reinforced)
    salience = round(rng.uniform(0.3, 1.0), 4)

    lifecycle: dict[str, Any] = {
        "decay": decay,
        "pinned": rng.random() < 0.02,
        "deletion_policy": rng.choice(policies),
    }
    if last_reinforced is not None:
        lifecycle["last_reinforced_at"] = _iso(last_reinforced)
    if rng.random() < 0.3:  # exported from this engine: the anchor travels with the record
        lifecycle["anchor_salience"] = salience
        lifecycle["anchor_at"] = _iso(updated)
        salience = round(salience * 0.5, 4)  # what Membrane would show; the anchor wins on import

    relations = []
    if index > 0 and rng.random() < 0.3:
        for _ in range(rng.randint(1, 2)):
            target = rng.randrange(max(0, index - 200_000), index)
            relations.append({"predicate": rng.choice(PREDICATES), "target_id": record_id(seed, target),
                              "weight": round(rng.random(), 3), "created_at": _iso(created)})
    sources = [{"kind": rng.choice(("event", "artifact", "tool_call", "observation", "outcome")),
                "ref": f"{rng.choice(WORDS)}://{index}/{k}", "created_by": actor}
               for k in range(rng.randint(1, 2))]
    doc: dict[str, Any] = {
        "id": record_id(seed, index), "type": type_, "sensitivity": sensitivity,
        "confidence": round(rng.uniform(0.3, 1.0), 3), "salience": salience, "scope": scope,
        "tags": rng.sample(TAGS, rng.randint(0, 3)),
        "created_at": _iso(created), "updated_at": _iso(updated),
        "lifecycle": lifecycle,
        "provenance": {"sources": sources, "created_by": actor},
        "relations": relations,
        "payload": _payload(rng, type_, created, index),
        "audit_log": audit,
    }
    if rng.random() < 0.02:  # an unknown field from a newer Membrane: kept on import, written on export
        doc["x_origin"] = {"deployment": "membrane-go", "build": rng.randint(100, 999)}
    doc["_created"] = created
    doc["_anchor"] = (lifecycle["anchor_salience"], updated) if "anchor_salience" in lifecycle else (salience, updated)
    return doc


def records(n: int, seed: int = DEFAULT_SEED, start: int = 0) -> Iterator[dict[str, Any]]:
    """Records ``start`` .. ``n - 1`` of the store for ``seed`` (same seed, same records)."""
    block = start // BLOCK
    while block * BLOCK < n:
        rng = random.Random(seed * 1_000_003 + block)
        lo = block * BLOCK
        for index in range(lo, min(n, lo + BLOCK)):
            doc = make_record(rng, seed, index)
            if index >= start:
                yield doc
        block += 1


def _chunk_lines(seed: int, lo: int, hi: int) -> bytes:
    """Records lo .. hi - 1 as JSON Lines (what a side process hands the file writer)."""
    return b"".join(orjson.dumps(doc) + b"\n" for doc in records(hi, seed, lo))


def write_jsonl(path: Path, n: int, seed: int = DEFAULT_SEED, processes: int | None = None,
                progress: bool = True) -> float:
    """The first ``n`` records for ``seed`` as a JSON Lines file, generated in ``processes``
    side processes (default: one per core). Returns the seconds it took."""
    began = time.perf_counter()
    processes = processes or os.cpu_count() or 1
    bounds = [(lo, min(n, lo + BLOCK)) for lo in range(0, n, BLOCK)]
    bar = _bar(n, "generate", progress)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as out, multiprocessing.get_context("fork").Pool(processes) as pool:
            for (lo, hi), data in zip(bounds, pool.imap(_star_chunk, [(seed, lo, hi) for lo, hi in bounds])):
                out.write(data)
                if bar is not None:
                    bar.update(hi - lo)
        partial.replace(path)  # a file at ``path`` is always complete
    finally:
        partial.unlink(missing_ok=True)
        if bar is not None:
            bar.close()
    return time.perf_counter() - began


def _star_chunk(args: tuple[int, int, int]) -> bytes:
    return _chunk_lines(*args)


def _bar(total: int, desc: str, progress: bool):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the bench extra
        return None
    return tqdm(total=total, unit="rec", unit_scale=True, desc=desc, file=sys.stderr)


def generate(url: str, n: int, seed: int = DEFAULT_SEED, progress: bool = True, jsonl: Path | None = None,
             workers: int | None = None) -> dict[str, float]:
    """Fill the (empty) store at ``url`` with the first ``n`` records for ``seed``: written to
    a JSON Lines file first (``jsonl``, reused when it exists; else a temporary file), then
    imported with ``Membrane.import_file`` on ``workers`` processes (default: one per core).
    Returns the seconds each step took and the import's records per second."""
    from membrane_engine import Membrane

    workers = workers or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="membrane-generate-") as tmp:
        path = Path(jsonl) if jsonl is not None else Path(tmp) / f"records-{n}-s{seed}.jsonl"
        generate_s = 0.0
        if not path.exists():
            generate_s = write_jsonl(path, n, seed, progress=progress)
        m = Membrane.open(url, load_sample=False)
        bar = _bar(n, "import", progress)

        def advance(done: int, total: int) -> None:
            if bar is not None:
                bar.n = done
                bar.refresh()

        try:
            began = time.perf_counter()
            count = m.import_file(path, actor=ACTOR, progress=advance, workers=workers)
            import_s = time.perf_counter() - began
        finally:
            if bar is not None:
                bar.close()
            m.close()
    return {"records": count, "generate_s": round(generate_s, 2), "import_s": round(import_s, 2),
            "import_records_per_s": round(count / import_s) if import_s else 0, "workers": workers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, required=True, help="number of records")
    parser.add_argument("--db", required=True, help="SQLAlchemy URL of the (empty) store to fill")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--jsonl", type=Path, help="keep the records in this JSON Lines file (reused if it exists)")
    parser.add_argument("--workers", type=int, default=None, help="import worker processes (default: one per core)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    result = generate(args.db, args.n, args.seed, progress=not args.quiet, jsonl=args.jsonl, workers=args.workers)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
