#!/usr/bin/env python3
"""Build sample_data/membrane_sample.json: the memory of a coding agent ("kestrel").

The store is a hand-written set of scenarios, not random filler. Kestrel works for Maya Chen
across three projects and keeps some knowledge unscoped:

- project-alpha  a Go API gateway: the auth middleware refactor, a flaky pytest e2e suite in CI,
                 the rotation of the staging JWT signing key;
- project-orion  a Python billing service: the Postgres 13 -> 16 upgrade, an alembic migration
                 that adds invoices.tenant_id NOT NULL, a throttled backfill;
- infra-ops      Kubernetes and Terraform: incident INC-2291 (ingress-nginx CrashLoopBackOff after a
                 cert-manager upgrade), a stuck Terraform state lock, an AWS key rotation;
- user-prefs     Maya's editor, language and code-style preferences;
- ""             tool knowledge (ripgrep, pytest, docker, terraform, git), people, shared repos.

Everything is deterministic: ids are uuid5 of readable names, the few random choices (CI run
numbers, durations of routine episodes) come from random.Random(SEED). Run

    python sample_data/build_sample.py

to rewrite sample_data/membrane_sample.json; the self-checks at the end (ids, relation targets,
enums, timestamps, leak canaries, selector scenario) must pass or nothing is written.

Secrets in this file are fake: every one contains the uppercase marker "FAKE" and appears only in
the payload of a high or hyper record. No public, low or medium record contains "fake" in any case.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 20261120
RNG = random.Random(SEED)
NOW = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)        # the store's "now"
EARLIEST = datetime(2026, 8, 1, 0, 0, 0, tzinfo=timezone.utc)
NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://membrane-sample.example.invalid/kestrel")
OUT = Path(__file__).resolve().parent / "membrane_sample.json"

MIN, HOUR, DAY = 60, 3600, 86400

TYPES = ("episodic", "working", "semantic", "competence", "plan_graph", "entity")
SENSITIVITY = ("public", "low", "medium", "high", "hyper")
LEVEL = {s: i for i, s in enumerate(SENSITIVITY)}
CURVES = ("exponential", "linear", "custom")
POLICIES = ("auto_prune", "manual_only", "never")
REVISION_STATUS = ("active", "contested", "retracted")
VALIDITY = ("global", "conditional", "timeboxed")
TASK_STATE = ("planning", "executing", "blocked", "waiting", "done")
OUTCOMES = ("success", "failure", "partial")
AUDIT_ACTIONS = ("create", "revise", "fork", "merge", "delete", "reinforce", "decay")
PROV_KINDS = ("event", "artifact", "tool_call", "observation", "outcome")
EDGE_KINDS = ("data", "control")
EVIDENCE_TYPES = ("event", "tool", "observation", "human")

# actors
AGENT = "agent:kestrel"
CONSOL = "consolidator:v2"
INTERP = "interpretation:v1"
CURATOR = "curator:weekly-review"
MAYA = "user:maya.chen"
DEV = "user:dev.patel"
SOFIA = "user:sofia.alvarez"
TOMASZ = "user:tomasz.nowak"
PRIYA = "user:priya.raman"
JONAS = "user:jonas.berg"

CREATED_BY = {
    "episodic": "capture:v3",
    "working": "capture:v3",
    "semantic": "consolidation:v2",
    "competence": "consolidation:v2",
    "plan_graph": "consolidation:v2",
    "entity": "interpretation:v1",
}
DEFAULT_SOURCE_KIND = {
    "episodic": "event",
    "working": "observation",
    "semantic": "observation",
    "competence": "outcome",
    "plan_graph": "outcome",
    "entity": "observation",
}


def I(name: str) -> str:
    """The record id of a readable name (uuid5, stable across runs)."""
    return str(uuid.uuid5(NS, name))


def T(s: str) -> datetime:
    """'MM-DD HH:MM' or 'MM-DD HH:MM:SS' in 2026, UTC."""
    fmt = "%Y-%m-%d %H:%M:%S" if s.count(":") == 2 else "%Y-%m-%d %H:%M"
    return datetime.strptime("2026-" + s, fmt).replace(tzinfo=timezone.utc)


def Z(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def when(x) -> datetime:
    return x if isinstance(x, datetime) else T(x)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- lifecycles

def decay(curve="exponential", half_life=30 * DAY, min_salience=0.05, max_age=0, gain=0.15, points=None):
    d = {
        "curve": curve,
        "half_life_seconds": int(half_life),
        "min_salience": min_salience,
        "max_age_seconds": int(max_age),
        "reinforcement_gain": gain,
    }
    if points is not None:
        d["points"] = [[int(s), float(f)] for s, f in points]
    return d


DEFAULT_DECAY = {
    "episodic": lambda: decay(half_life=3 * DAY, min_salience=0.0, gain=0.2),
    "working": lambda: decay(half_life=36 * HOUR, min_salience=0.0, gain=0.25),
    "semantic": lambda: decay(half_life=90 * DAY, min_salience=0.05, gain=0.15),
    "competence": lambda: decay(half_life=180 * DAY, min_salience=0.1, gain=0.1),
    "plan_graph": lambda: decay(half_life=180 * DAY, min_salience=0.1, gain=0.1),
    "entity": lambda: decay(half_life=365 * DAY, min_salience=0.2, gain=0.1),
}

# custom profiles (piecewise-linear factor over seconds since the anchor)
HOLD_3D_THEN_DROP = [[0, 1.0], [3 * DAY, 1.0], [7 * DAY, 0.5], [14 * DAY, 0.1]]
INCIDENT_TAIL = [[0, 1.0], [2 * DAY, 0.9], [14 * DAY, 0.6], [45 * DAY, 0.2]]
TIMEBOXED_FACT = [[0, 1.0], [21 * DAY, 1.0], [28 * DAY, 0.25], [35 * DAY, 0.0]]
SLOW_THEN_FLOOR = [[0, 1.0], [30 * DAY, 0.8], [120 * DAY, 0.4]]


def factor(dec: dict, delta: float) -> float:
    """Decay factor f(delta) of SPEC section 2."""
    h = dec["half_life_seconds"]
    curve = dec["curve"]
    if curve == "linear":
        return max(0.0, 1.0 - delta / (2.0 * h))
    if curve == "custom" and dec.get("points"):
        pts = dec["points"]
        if delta <= pts[0][0]:
            return pts[0][1]
        for (s0, f0), (s1, f1) in zip(pts, pts[1:]):
            if delta <= s1:
                return f0 + (f1 - f0) * (delta - s0) / (s1 - s0)
        return pts[-1][1]
    return 2.0 ** (-delta / h)


def salience_at(anchor_s: float, anchor_at: datetime, t: datetime, created: datetime,
                dec: dict, pinned: bool) -> float:
    """S(t) of SPEC section 2 from an anchor (value, instant)."""
    if pinned:
        return anchor_s
    age = (t - created).total_seconds()
    if dec["max_age_seconds"] > 0 and age >= dec["max_age_seconds"]:
        return 0.0
    if anchor_s <= dec["min_salience"]:
        return anchor_s
    d = max(0.0, (t - anchor_at).total_seconds())
    return max(anchor_s * factor(dec, d), dec["min_salience"])


# ---------------------------------------------------------------- payload builders

def sem(subject, predicate, obj, *, mode="global", conditions=None, start=None, end=None,
        ev=(), policy="supersede_on_conflict"):
    """Semantic payload. ev: [(source_type, source_id, 'MM-DD HH:MM')]."""
    return {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "validity": {
            "mode": mode,
            "conditions": conditions or {},
            "start": Z(when(start)) if start else None,
            "end": Z(when(end)) if end else None,
        },
        "evidence": [
            {"source_type": st, "source_id": sid, "timestamp": Z(when(ts))} for st, sid, ts in ev
        ],
        "revision_policy": policy,
        "revision": {"supersedes": None, "superseded_by": None, "status": "active"},
    }


def comp(skill, triggers, recipe, tools, failure_modes, fallbacks, perf, version):
    """Competence payload. triggers: [(signal, conditions)]; recipe: [(step, tool, args_schema,
    validation)]; perf: (success_count, failure_count, avg_latency_ms, 'MM-DD HH:MM')."""
    s, f, lat, last = perf
    return {
        "skill_name": skill,
        "triggers": [{"signal": sig, "conditions": cond} for sig, cond in triggers],
        "recipe": [
            {"step": st, "tool": tool, "args_schema": args, "validation": val}
            for st, tool, args, val in recipe
        ],
        "required_tools": list(tools),
        "failure_modes": list(failure_modes),
        "fallbacks": list(fallbacks),
        "performance": {
            "success_count": s,
            "failure_count": f,
            "success_rate": round(s / (s + f), 4) if s + f else 0.0,
            "avg_latency_ms": lat,
            "last_used_at": Z(when(last)),
        },
        "version": version,
    }


def plan(plan_id, version, intent, constraints, inputs, outputs, nodes, edges, metrics):
    """Plan graph payload. nodes: [(id, op, params, guards)]; edges: [(from, to, kind)];
    metrics: (avg_latency_ms, failure_rate, execution_count, 'MM-DD HH:MM' or None)."""
    lat, fr, n, last = metrics
    return {
        "plan_id": plan_id,
        "version": version,
        "intent": intent,
        "constraints": constraints,
        "inputs_schema": inputs,
        "outputs_schema": outputs,
        "nodes": [{"id": i, "op": op, "params": p, "guards": g} for i, op, p, g in nodes],
        "edges": [{"from": a, "to": b, "kind": k} for a, b, k in edges],
        "metrics": {
            "avg_latency_ms": lat,
            "failure_rate": fr,
            "execution_count": n,
            "last_executed_at": Z(when(last)) if last else None,
        },
    }


def ent(canonical, primary, types, aliases, identifiers, summary):
    return {
        "canonical_name": canonical,
        "primary_type": primary,
        "types": list(types),
        "aliases": [{"value": v, "kind": k} for v, k in aliases],
        "identifiers": [{"namespace": ns, "value": v} for ns, v in identifiers],
        "summary": summary,
    }


def work(thread, state, constraints, next_actions, questions, summary):
    """Working payload. constraints: [(type, key, value, required)]."""
    return {
        "thread_id": thread,
        "state": state,
        "active_constraints": [
            {"type": t, "key": k, "value": v, "required": r} for t, k, v, r in constraints
        ],
        "next_actions": list(next_actions),
        "open_questions": list(questions),
        "context_summary": summary,
    }


def env(base: dict, **context) -> dict:
    e = copy.deepcopy(base)
    e["context"].update(context)
    return e


def epi(thread, start, steps, environment, outcome, artifacts=()):
    """Episodic payload.

    steps: [(minutes_after_start, event_kind, summary, tool[, deps])] where tool is None or
    (tool, args, result) and deps lists the 1-based numbers of earlier tool nodes this one
    depends on. Without deps a tool node depends on the previous tool node.
    """
    t0 = when(start)
    timeline, graph = [], []
    for i, step in enumerate(steps):
        off, kind, summary, tool = step[:4]
        ts = t0 + timedelta(minutes=off)
        ref = f"{thread}:turn-{i + 1}"
        if tool is not None:
            node_id = f"n{len(graph) + 1}"
            name, args, result = tool[0], tool[1], tool[2]
            if len(step) > 4:
                deps = [f"n{k}" for k in step[4]]
            else:
                deps = [graph[-1]["id"]] if graph else []
            graph.append({
                "id": node_id, "tool": name, "args": args, "result": result,
                "timestamp": Z(ts), "depends_on": deps,
            })
            ref = f"{thread}:{node_id}"
        timeline.append({"t": Z(ts), "event_kind": kind, "ref": ref, "summary": summary})
    return {
        "timeline": timeline,
        "tool_graph": graph,
        "environment": environment,
        "outcome": outcome,
        "artifacts": list(artifacts),
        "tool_graph_ref": f"toolgraph://{thread}" if graph else "",
    }


def end_of(payload) -> datetime:
    """Instant of the last timeline event of an episodic payload."""
    return max(datetime.strptime(e["t"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
               for e in payload["timeline"])


# ---------------------------------------------------------------- environments

ENV_ALPHA = {
    "os": "linux", "os_version": "Ubuntu 24.04.1 LTS",
    "tool_versions": {"go": "1.23.3", "git": "2.47.0", "rg": "14.1.1", "gh": "2.61.0",
                      "python": "3.12.7", "pytest": "8.3.3"},
    "working_directory": "/home/maya/src/alpha-gateway",
    "context": {"repo": "examplecorp/alpha-gateway", "host": "maya-workstation"},
}
ENV_CI = {
    "os": "linux", "os_version": "Ubuntu 22.04.5 LTS (GitHub-hosted ubuntu-22.04)",
    "tool_versions": {"go": "1.23.3", "python": "3.12.7", "pytest": "8.3.3",
                      "pytest-randomly": "3.15.0", "docker": "26.1.3"},
    "working_directory": "/home/runner/work/alpha-gateway/alpha-gateway",
    "context": {"repo": "examplecorp/alpha-gateway", "workflow": ".github/workflows/ci.yml"},
}
ENV_ORION = {
    "os": "linux", "os_version": "Ubuntu 24.04.1 LTS",
    "tool_versions": {"python": "3.12.7", "uv": "0.5.2", "alembic": "1.13.3", "psql": "16.4",
                      "rg": "14.1.1", "pytest": "8.3.3"},
    "working_directory": "/home/maya/src/orion-billing",
    "context": {"repo": "examplecorp/orion-billing", "host": "maya-workstation"},
}
ENV_INFRA = {
    "os": "linux", "os_version": "Ubuntu 24.04.1 LTS",
    "tool_versions": {"kubectl": "1.30.5", "helm": "3.16.2", "terraform": "1.9.8",
                      "aws-cli": "2.18.14", "docker": "27.3.1", "k9s": "0.32.5"},
    "working_directory": "/home/maya/src/infra-live",
    "context": {"repo": "examplecorp/infra-live", "host": "maya-workstation"},
}
ENV_LAPTOP = {
    "os": "darwin", "os_version": "macOS 15.1 (24B83)",
    "tool_versions": {"nvim": "0.10.2", "git": "2.47.0", "rg": "14.1.1", "fd": "10.2.0",
                      "go": "1.23.3", "python": "3.12.7"},
    "working_directory": "/Users/maya/src",
    "context": {"host": "maya-mbp"},
}

# ---------------------------------------------------------------- the registry

SPECS: dict[str, dict] = {}


def add(name, kind, payload, *, sens, conf, scope, tags, at, sal, why, by=AGENT,
        history=(), dec=None, pinned=False, policy="auto_prune", sources=None, creator=None,
        rels=(), supersedes=None, forked_from=None, merged_from=None):
    """Register one record by readable name.

    history: [(action, 'MM-DD HH:MM', actor, rationale[, extra])] after the create entry, with
    action one of reinforce (extra: gain), penalize (extra: amount), revise, pin,
    boost (extra: new salience), reclassify, retract, superseded (extra: new record name),
    contest (extra: contesting record name), fork (extra: child name), merge (extra: merged name).
    rels: [(predicate, target_name, weight)] or with a 4th element 'MM-DD HH:MM'.
    """
    assert name not in SPECS, f"duplicate name {name}"
    assert kind in TYPES, kind
    SPECS[name] = dict(
        name=name, kind=kind, payload=payload, sens=sens, conf=conf, scope=scope,
        tags=list(tags), at=when(at), sal=sal, why=why, by=by, history=list(history),
        dec=dec or DEFAULT_DECAY[kind](), pinned=pinned, policy=policy, sources=sources,
        creator=creator or CREATED_BY[kind], rels=list(rels), supersedes=supersedes,
        forked_from=forked_from, merged_from=merged_from,
    )
    return name


# =============================================================================================
# Entities: people, repositories, services, files, tools, the incident
# =============================================================================================

def entity(key, canonical, primary, types, aliases, identifiers, summary, *, sens="public",
           scope="", conf=0.95, at="08-03 09:00", sal=0.8, tags=(), policy="manual_only", **kw):
    return add("ent:" + key, "entity", ent(canonical, primary, types, aliases, identifiers, summary),
               sens=sens, conf=conf, scope=scope, tags=list(dict.fromkeys(["entity", primary.lower(), *tags])), at=at,
               sal=sal, why=f"resolved entity '{canonical}' from captured mentions", by=INTERP,
               policy=policy, **kw)


# people
entity("maya", "Maya Chen", "Person", ["Person", "User"],
       [("maya", "first_name"), ("mchen", "handle"), ("@mchen-dev", "github")],
       [("github", "mchen-dev"), ("email", "maya.chen@example.com"), ("slack", "U04MAYACHEN")],
       "Staff engineer kestrel works for. Owns alpha-gateway and orion-billing, reviews every "
       "agent PR, works from Berlin (Europe/Berlin), prefers terse status updates.",
       sens="medium", conf=0.99, at="08-03 08:41", sal=0.95, pinned=True, policy="never", tags=["people", "owner"],
       history=[("reinforce", "09-02 10:05", AGENT, "mentioned in editor switch conversation"),
                ("pin", "09-02 10:06", MAYA, "keep my own profile pinned")])
entity("dev", "Dev Patel", "Person", ["Person", "Reviewer"],
       [("dev", "first_name"), ("dpatel", "handle")],
       [("github", "dpatel"), ("codeowners", "pkg/auth/")],
       "Code owner of pkg/auth in alpha-gateway. Asks for table-driven tests and explicit "
       "testing notes in PR descriptions.",
       sens="low", scope="project-alpha", conf=0.93, at="09-18 14:10", sal=0.7,
       tags=["people", "reviewer"],
       history=[("reinforce", "10-07 16:30", AGENT, "reviewed PR #418"),
                ("reinforce", "10-14 11:05", AGENT, "approved PR #418 after second round")])
entity("sofia", "Sofia Alvarez", "Person", ["Person", "DBA"],
       [("sofia", "first_name"), ("salvarez", "handle")],
       [("github", "salvarez"), ("slack", "U02SOFIADBA")],
       "Database administrator for orion-billing; approves every production migration and "
       "watches replica lag during backfills.",
       sens="low", scope="project-orion", conf=0.92, at="10-14 09:20", sal=0.72,
       tags=["people", "dba"],
       history=[("reinforce", "10-28 15:40", AGENT, "stopped the backfill because of replica lag")])
entity("tomasz", "Tomasz Nowak", "Person", ["Person", "SRE"],
       [("tomasz", "first_name"), ("tnowak", "handle")],
       [("github", "tnowak"), ("pagerduty", "PTNOWAK7")],
       "SRE on the infra-ops rotation, incident commander for INC-2291. Personal pager "
       "+1-555-0142 (FAKE-PAGER-TNOWAK), escalation only after the primary on-call.",
       sens="high", scope="infra-ops", conf=0.9, at="10-17 11:04", sal=0.75,
       tags=["people", "oncall"],
       history=[("revise", "11-03 02:16", AGENT, "incident commander for INC-2291")])
entity("priya", "Priya Raman", "Person", ["Person", "Security"],
       [("priya", "first_name"), ("praman", "handle")],
       [("github", "praman"), ("email", "security@example.com")],
       "Security lead. Approves secret rotations and any change to token validation.",
       sens="low", conf=0.9, at="08-12 10:00", sal=0.6, tags=["people", "security"],
       history=[("reinforce", "11-12 10:15", AGENT, "asked for approval of the JWT key rotation")])
entity("jonas", "Jonas Berg", "Person", ["Person", "Platform"],
       [("jonas", "first_name"), ("jberg", "handle")],
       [("github", "jberg")],
       "Maintains examplecorp/ci-actions and the self-hosted runner pool.",
       sens="low", conf=0.85, at="09-29 11:00", sal=0.55, tags=["people", "ci"])
entity("agent", "kestrel", "Agent", ["Agent"],
       [("the agent", "role"), ("kestrel-bot", "github")],
       [("github", "kestrel-bot"), ("actor", AGENT)],
       "The coding agent that owns this memory store. Commits as kestrel-bot, never merges "
       "its own PRs.",
       sens="public", conf=0.99, at="08-01 08:00", sal=0.9, pinned=True, policy="never",
       tags=["self"])

# projects and repositories
entity("project-alpha", "Project Alpha", "Project", ["Project"],
       [("alpha", "short_name")], [("jira", "ALPHA")],
       "Public API gateway in Go (alpha-gateway): routing, authentication, rate limiting.",
       scope="project-alpha", at="08-03 09:10", sal=0.8, tags=["project"])
entity("project-orion", "Project Orion", "Project", ["Project"],
       [("orion", "short_name")], [("jira", "ORION")],
       "Billing service in Python (orion-billing) on PostgreSQL: invoices, tenants, Stripe sync.",
       scope="project-orion", at="08-03 09:12", sal=0.8, tags=["project"])
entity("repo-alpha", "examplecorp/alpha-gateway", "Repository", ["Repository"],
       [("alpha-gateway", "name"), ("gateway repo", "nickname")],
       [("github", "examplecorp/alpha-gateway"), ("go_module", "github.com/examplecorp/alpha-gateway")],
       "Go 1.23 module; chi router; e2e tests in tests/e2e run with pytest against a "
       "docker-compose stack.",
       scope="project-alpha", at="08-03 09:15", sal=0.85, tags=["repo", "go"])
entity("repo-orion", "examplecorp/orion-billing", "Repository", ["Repository"],
       [("orion-billing", "name")], [("github", "examplecorp/orion-billing")],
       "Python 3.12 service managed with uv; SQLAlchemy 2 models, alembic migrations under "
       "migrations/versions.",
       scope="project-orion", at="08-03 09:16", sal=0.85, tags=["repo", "python"])
entity("repo-infra", "examplecorp/infra-live", "Repository", ["Repository"],
       [("infra-live", "name"), ("infra repo", "nickname")],
       [("github", "examplecorp/infra-live")],
       "Terraform (envs/prod-eu1, envs/staging) and Helm values for the EKS clusters.",
       sens="low", scope="infra-ops", at="08-04 10:00", sal=0.8, tags=["repo", "terraform"])
entity("repo-ci-actions", "examplecorp/ci-actions", "Repository", ["Repository"],
       [("ci-actions", "name")], [("github", "examplecorp/ci-actions")],
       "Shared composite GitHub Actions (setup-go-cache, compose-up, upload-junit).",
       at="09-29 11:05", sal=0.6, tags=["repo", "ci"])

# code, services, data
entity("auth-mw", "auth middleware", "File", ["File", "Symbol"],
       [("pkg/auth/middleware.go", "path"), ("auth.Middleware", "symbol"), ("RequireJWT", "legacy_symbol")],
       [("path", "pkg/auth/middleware.go"), ("go_symbol", "github.com/examplecorp/alpha-gateway/pkg/auth.Middleware")],
       "Chi middleware that validates the bearer JWT once per request and stores claims in "
       "the context; replaced 37 per-handler RequireJWT calls in October.",
       sens="low", scope="project-alpha", conf=0.94, at="09-18 14:00", sal=0.85,
       tags=["auth", "go"],
       history=[("revise", "10-15 17:05", AGENT, "summary updated after PR #418 merged"),
                ("reinforce", "11-19 09:40", AGENT, "touched again for the rate-limit work")])
entity("alpha-svc", "alpha-gateway", "Service", ["Service"],
       [("gateway", "nickname"), ("alpha-gateway.staging", "deployment")],
       [("k8s_deployment", "alpha/alpha-gateway"), ("datadog_service", "alpha-gateway")],
       "The deployed gateway: 6 replicas in prod-eu1, 2 in staging, behind ingress-nginx.",
       sens="low", scope="project-alpha", at="08-05 12:00", sal=0.7, tags=["service"])
entity("flaky-test", "test_refresh_rotates_token", "Symbol", ["Symbol", "Test"],
       [("the refresh flake", "nickname"), ("test_refresh_rotates_token", "name")],
       [("pytest_nodeid", "tests/e2e/test_token_refresh.py::test_refresh_rotates_token")],
       "E2E test that refreshes a token and asserts the new one differs; failed ~7% of CI runs "
       "until the exp-granularity fix of Oct 10.",
       scope="project-alpha", conf=0.96, at="09-29 10:40", sal=0.75,
       tags=["ci", "flaky-test", "pytest"],
       history=[("reinforce", "10-10 18:20", AGENT, "root cause found"),
                ("reinforce", "11-17 16:40", AGENT, "used as the worked example of the flaky-test recipe")])
entity("ci-workflow", ".github/workflows/ci.yml", "File", ["File"],
       [("alpha CI", "nickname"), ("ci.yml", "name")],
       [("path", ".github/workflows/ci.yml"), ("github_workflow", "examplecorp/alpha-gateway/ci")],
       "Alpha CI: lint (golangci-lint), unit (go test -race), e2e (pytest against compose).",
       scope="project-alpha", at="09-29 10:42", sal=0.6, tags=["ci"])
entity("orion-db", "orion-prod-db", "Database", ["Database", "Service"],
       [("orion prod db", "nickname"), ("billing db", "nickname")],
       [("aws_rds_cluster", "orion-prod"), ("datadog_service", "orion-postgres")],
       "Aurora-compatible PostgreSQL cluster behind orion-billing: one writer, two readers; "
       "upgraded from 13 to 16 on Nov 9.",
       sens="medium", scope="project-orion", conf=0.95, at="08-06 09:55", sal=0.85,
       tags=["postgres", "database"],
       history=[("revise", "11-09 06:10", AGENT, "engine version now 16.4")])
entity("invoices", "billing.invoices", "Database", ["Database", "Table"],
       [("invoices table", "nickname")], [("postgres_table", "billing.invoices")],
       "Largest orion table (~48M rows). Gains tenant_id NOT NULL in migration 7c1e2f9a4b10.",
       sens="low", scope="project-orion", at="10-20 10:00", sal=0.7, tags=["postgres", "schema"])
entity("k8s-cluster", "k8s-prod-eu1", "Service", ["Service", "Cluster"],
       [("prod-eu1", "short_name"), ("the EU cluster", "nickname")],
       [("aws_eks_cluster", "prod-eu1"), ("kube_context", "arn:aws:eks:eu-central-1:cluster/prod-eu1")],
       "Production EKS cluster in eu-central-1; m6i.xlarge managed node group; runs alpha-gateway, "
       "orion-billing, payments-api.",
       sens="medium", scope="infra-ops", conf=0.95, at="08-04 10:05", sal=0.85,
       tags=["kubernetes", "eks"])
entity("ingress", "ingress-nginx", "Service", ["Service", "Tool"],
       [("nginx ingress", "nickname")], [("helm_release", "ingress-nginx/ingress-nginx")],
       "Ingress controller of prod-eu1; its admission webhook depends on a cert issued by "
       "cert-manager.",
       scope="infra-ops", at="08-04 10:06", sal=0.7, tags=["kubernetes", "ingress"])
entity("cert-manager", "cert-manager", "Service", ["Service", "Tool"],
       [("cm", "abbreviation")], [("helm_release", "cert-manager/cert-manager")],
       "Issues TLS certificates in prod-eu1; the 1.15.3 upgrade triggered INC-2291.",
       scope="infra-ops", at="11-03 02:30", sal=0.7, tags=["kubernetes", "tls"])
entity("inc-2291", "INC-2291", "Incident", ["Incident"],
       [("ingress outage Nov 3", "nickname")], [("pagerduty", "Q2291INC"), ("jira", "OPS-2291")],
       "Sev-2, 2026-11-03 02:14-03:02 UTC: ingress-nginx controller pods in CrashLoopBackOff "
       "after cert-manager 1.15.3 rotated the webhook CA; 48 min of 5xx on alpha-gateway.",
       sens="medium", scope="infra-ops", conf=0.97, at="11-03 02:15", sal=0.9,
       tags=["incident", "kubernetes"], policy="never",
       history=[("reinforce", "11-05 14:00", AGENT, "postmortem written"),
                ("reinforce", "11-06 16:20", AGENT, "ingress upgrade referenced it")])
entity("vault", "HashiCorp Vault", "Service", ["Service", "Tool"],
       [("vault", "name")], [("url", "https://vault.internal.example.com")],
       "Where every team secret lives (kv-v2 mounts secret/alpha, secret/orion, secret/infra). "
       "Kestrel may read, never write, without a human approval.",
       sens="medium", conf=0.9, at="08-12 10:05", sal=0.7, tags=["secrets"])
entity("jwt-key", "alpha staging JWT signing key", "Other", ["Secret", "Other"],
       [("staging signing key", "nickname")],
       [("vault_path", "secret/alpha/staging/jwt-signing")],
       "HS256 key used by alpha-gateway staging until the rotation of Nov 2026; current value "
       "FAKE-JWT-HS256-alpha-staging-7f3e-not-real (kid staging-2026-08).",
       sens="hyper", scope="project-alpha", conf=0.9, at="08-14 11:00", sal=0.6,
       tags=["secret", "auth"])

# tools
entity("ripgrep", "ripgrep", "Tool", ["Tool"], [("rg", "binary")],
       [("homebrew", "ripgrep"), ("github", "BurntSushi/ripgrep")],
       "Recursive regex search; kestrel's default code search (rg 14.1.1).",
       at="08-03 09:30", sal=0.75, tags=["tool", "search"])
entity("pytest", "pytest", "Tool", ["Tool"], [("py.test", "legacy_name")],
       [("pypi", "pytest")],
       "Python test runner; used for orion unit tests and alpha e2e tests (8.3.3).",
       at="08-03 09:31", sal=0.75, tags=["tool", "testing"])
entity("docker", "Docker", "Tool", ["Tool"], [("docker", "binary"), ("docker compose", "plugin")],
       [("url", "https://docs.docker.com")],
       "Container runtime; the alpha e2e stack runs under docker compose.",
       at="08-03 09:32", sal=0.7, tags=["tool", "containers"])
entity("terraform", "Terraform", "Tool", ["Tool"], [("tf", "abbreviation")],
       [("github", "hashicorp/terraform")],
       "IaC tool for infra-live (1.9.8), state in S3 with a DynamoDB lock table.",
       at="08-04 10:10", sal=0.75, tags=["tool", "iac"])
entity("neovim", "Neovim", "Tool", ["Tool", "Editor"], [("nvim", "binary")],
       [("homebrew", "neovim")],
       "Maya's editor since September (LazyVim distribution, gopls + pyright).",
       scope="user-prefs", at="09-02 10:00", sal=0.7, tags=["tool", "editor"])
entity("gh-actions", "GitHub Actions", "Service", ["Service", "Tool"], [("GHA", "abbreviation")],
       [("url", "https://github.com/features/actions")],
       "CI for all three repositories; hosted ubuntu-22.04 runners plus a small self-hosted pool.",
       at="08-03 09:34", sal=0.65, tags=["ci"])
entity("alembic", "Alembic", "Tool", ["Tool"], [("alembic", "binary")], [("pypi", "alembic")],
       "SQLAlchemy migration tool used by orion-billing (1.13.3).",
       scope="project-orion", at="10-14 09:35", sal=0.65, tags=["tool", "migrations"])
entity("postgres", "PostgreSQL", "Tool", ["Tool", "Database"], [("postgres", "name"), ("pg", "abbreviation")],
       [("url", "https://www.postgresql.org")],
       "Relational database engine; orion runs 16.4 since Nov 9.",
       at="08-03 09:33", sal=0.7, tags=["tool", "postgres"])
entity("eks-module", "terraform-aws-modules/eks", "Repository", ["Repository", "Tool"],
       [("eks module", "nickname")], [("terraform_registry", "terraform-aws-modules/eks/aws")],
       "Upstream Terraform module for the EKS clusters; infra-live pins v19.21 and is moving to v20.",
       scope="infra-ops", at="08-04 10:12", sal=0.6, tags=["terraform", "eks"])


def mention(*keys, w=0.7):
    return [("mentions_entity", "ent:" + k, w) for k in keys]


# =============================================================================================
# user-prefs: editor, languages, code style, working agreements
# =============================================================================================

add("e:onboarding", "episodic", epi("onboard-2026-08-03", "08-03 08:40", [
    (0, "user_message", "Maya: 'You'll be working on alpha, orion and infra-live. Start by reading my dotfiles.'", None),
    (3, "tool_call", "listed dotfiles repo", ("git", {"argv": ["clone", "--depth=1", "git@github.com:mchen-dev/dotfiles.git"]}, "cloned 214 files")),
    (6, "tool_call", "found editor settings", ("rg", {"pattern": "editor\\.(formatOnSave|rulers)", "path": "dotfiles/vscode"}, "settings.json: formatOnSave=true, rulers=[88]")),
    (9, "tool_call", "read git config", ("rg", {"pattern": "^\\s*(name|email|signingkey)", "path": "dotfiles/git/config"}, "user.name=Maya Chen; commit signing with ssh key"), [1]),
    (14, "agent_turn", "summarised preferences: VS Code, black at 88 columns, gofumpt, signed commits", None),
], ENV_LAPTOP, "success", ["notes/onboarding-2026-08-03.md"]),
    sens="low", conf=0.9, scope="user-prefs", tags=["onboarding", "preferences"],
    at="08-03 08:54", sal=0.55, why="first session with Maya",
    dec=decay(half_life=7 * DAY, min_salience=0.0, gain=0.2), rels=mention("maya"))

add("s:editor-vscode", "semantic", sem("maya", "uses_editor", "VS Code 1.92 with the Go and Python extensions",
    ev=[("event", I("e:onboarding"), "08-03 08:49")]),
    sens="low", conf=0.8, scope="user-prefs", tags=["preference", "editor"], at="08-03 09:40",
    sal=0.7, why="read from dotfiles/vscode/settings.json",
    history=[("reinforce", "08-19 11:00", AGENT, "Maya shared a VS Code screenshot"),
             ("superseded", "09-02 10:08", AGENT, "Maya switched to Neovim", "s:editor-nvim09")],
    rels=[("derived_from", "e:onboarding", 0.8)] + mention("maya"))

add("e:user-nvim", "episodic", epi("prefs-2026-09-02", "09-02 09:58", [
    (0, "user_message", "Maya: 'I moved to Neovim (LazyVim). Stop generating .vscode/ settings in scaffolds.'", None),
    (2, "tool_call", "looked for generated editor folders", ("rg", {"argv": ["--files", "-g", ".vscode/**", "-uu"], "path": "~/src"}, "3 files in alpha-gateway, 1 in orion-billing")),
    (5, "tool_call", "dropped .vscode from the scaffold template", ("git", {"argv": ["rm", "-r", "templates/go-service/.vscode"]}, "rm 'templates/go-service/.vscode/settings.json'")),
    (7, "tool_call", "added an .editorconfig instead", ("write_file", {"path": "templates/go-service/.editorconfig", "bytes": 212}, "written")),
    (9, "agent_turn", "confirmed: editor-agnostic config only (.editorconfig, gopls settings in repo)", None),
], env(ENV_LAPTOP, repo="examplecorp/templates"), "success", ["templates/go-service/.editorconfig"]),
    sens="low", conf=0.95, scope="user-prefs", tags=["preferences", "editor"],
    at="09-02 10:07", sal=0.6, why="user stated a new editor preference",
    rels=mention("maya", "neovim", "ripgrep"))

add("s:editor-nvim09", "semantic", sem("maya", "uses_editor",
    {"editor": "Neovim", "version": "0.9.5", "distribution": "LazyVim"},
    ev=[("human", "maya.chen/slack/2026-09-02T09:58", "09-02 09:58"), ("event", I("e:user-nvim"), "09-02 09:58")]),
    sens="low", conf=0.93, scope="user-prefs", tags=["preference", "editor"], at="09-02 10:08",
    sal=0.85, why="Maya said she moved to Neovim", supersedes="s:editor-vscode",
    history=[("reinforce", "10-02 09:10", AGENT, "asked for a gopls config snippet"),
             ("superseded", "11-04 18:30", AGENT, "upgraded to 0.10 with new LSP list", "s:editor-nvim010")],
    rels=[("derived_from", "e:user-nvim", 0.9)] + mention("maya", "neovim"))

add("s:editor-nvim010", "semantic", sem("maya", "uses_editor",
    {"editor": "Neovim", "version": "0.10.2", "distribution": "LazyVim",
     "lsp": ["gopls", "pyright", "terraform-ls"], "formatter_on_save": True},
    ev=[("human", "maya.chen/slack/2026-11-04T18:22", "11-04 18:22")]),
    sens="low", conf=0.95, scope="user-prefs", tags=["preference", "editor"], at="11-04 18:30",
    sal=0.9, why="Maya upgraded Neovim and added terraform-ls", supersedes="s:editor-nvim09",
    history=[("reinforce", "11-18 08:50", AGENT, "generated .nvim.lua project config for infra-live")],
    rels=mention("maya", "neovim"))

add("s:lang-backend", "semantic", sem("maya", "prefers_backend_language", "Go",
    conditions={}, ev=[("human", "maya.chen/slack/2026-08-03T09:20", "08-03 09:20")]),
    sens="low", conf=0.96, scope="user-prefs", tags=["preference", "language", "go"],
    at="08-03 09:42", sal=0.9, why="stated in the first session", pinned=True, policy="never",
    history=[("pin", "08-03 09:43", MAYA, "this will not change; keep it pinned"),
             ("reinforce", "09-18 14:00", AGENT, "auth middleware written in Go as expected")],
    rels=mention("maya"))

add("s:lang-scripts", "semantic", sem("maya", "prefers_scripting_stack", ["Python 3.12", "uv", "typer"],
    ev=[("human", "maya.chen/slack/2026-08-03T09:22", "08-03 09:22")]),
    sens="low", conf=0.88, scope="user-prefs", tags=["preference", "language", "python"],
    at="08-03 09:44", sal=0.75, why="one-off scripts and tooling go in Python with uv",
    dec=decay(half_life=120 * DAY, min_salience=0.05),
    history=[("reinforce", "10-21 12:00", AGENT, "wrote the backfill throttle script with uv run")],
    rels=mention("maya"))

add("s:go-format", "semantic", sem("maya", "go_formatting",
    {"formatter": "gofumpt", "imports": "goimports -local github.com/examplecorp",
     "lint": "golangci-lint v1.61 (errcheck, revive, gosec)"},
    ev=[("observation", "alpha-gateway/.golangci.yml", "08-05 12:10")]),
    sens="public", conf=0.9, scope="user-prefs", tags=["preference", "code-style", "go"],
    at="08-05 12:20", sal=0.7, why="read from alpha-gateway lint config and Maya's review comments",
    history=[("reinforce", "09-24 16:00", AGENT, "CI lint caught non-gofumpt formatting"),
             ("reinforce", "10-15 16:50", AGENT, "applied again on PR #418")],
    rels=mention("maya", "repo-alpha"))

add("s:py-style-88", "semantic", sem("maya", "python_line_length", 88,
    ev=[("observation", "dotfiles/vscode/settings.json", "08-03 08:49")]),
    sens="public", conf=0.75, scope="user-prefs", tags=["preference", "code-style", "python"],
    at="08-03 09:46", sal=0.6, why="black default seen in VS Code rulers",
    history=[("superseded", "09-12 15:32", AGENT, "Maya asked for 100 columns", "s:py-style-100")],
    rels=[("derived_from", "e:onboarding", 0.6)])

add("e:user-linelength", "episodic", epi("prefs-2026-09-12", "09-12 15:18", [
    (0, "user_message", "Maya: '88 columns is too tight for the SQLAlchemy code. Use 100 for Python, ruff too.'", None),
    (2, "tool_call", "checked the current ruff config", ("rg", {"pattern": "line-length", "path": "pyproject.toml"}, "pyproject.toml:41: line-length = 88")),
    (4, "tool_call", "set line-length to 100", ("edit_file", {"path": "pyproject.toml", "replace": {"line-length = 88": "line-length = 100"}}, "1 replacement")),
    (6, "tool_call", "measured the reformat", ("ruff", {"argv": ["format", "--check", "."]}, "212 files would be reformatted")),
    (9, "user_message", "Maya: 'Do the reformat in its own PR so blame stays readable.'", None),
    (12, "tool_call", "opened the reformat PR", ("gh", {"argv": ["pr", "create", "--title", "style: ruff line-length 100"]}, "https://github.com/examplecorp/orion-billing/pull/233"), [3]),
], env(ENV_ORION, branch="style/line-length-100"), "success", ["orion-billing#233", ".git-blame-ignore-revs"]),
    sens="low", conf=0.95, scope="user-prefs", tags=["preferences", "code-style", "python"],
    at="09-12 15:31", sal=0.55, why="preference change with a follow-up PR",
    rels=mention("maya", "repo-orion"))

add("s:py-style-100", "semantic", sem("maya", "python_line_length", 100,
    conditions={"tools": ["ruff format", "ruff check"]},
    ev=[("event", I("e:user-linelength"), "09-12 15:18")]),
    sens="public", conf=0.95, scope="user-prefs", tags=["preference", "code-style", "python"],
    at="09-12 15:32", sal=0.85, why="explicit instruction from Maya", supersedes="s:py-style-88",
    history=[("reinforce", "10-21 11:30", AGENT, "ruff config in the backfill script PR"),
             ("reinforce", "11-13 15:10", AGENT, "applied in the toolchain bump PRs")],
    rels=[("derived_from", "e:user-linelength", 0.9)])

add("s:commit-style", "semantic", sem("maya", "commit_message_style",
    {"convention": "Conventional Commits", "scope_required": True, "max_subject_len": 72,
     "body": "explain why, not what", "trailers": ["Refs: <ticket>"]},
    ev=[("observation", "alpha-gateway/.commitlintrc.yml", "08-05 12:12")]),
    sens="public", conf=0.92, scope="user-prefs", tags=["preference", "git"],
    at="08-05 12:25", sal=0.8, why="commitlint config plus Maya's review comment",
    history=[("reinforce", "09-26 10:00", AGENT, "commitlint rejected 'fixed stuff'"),
             ("reinforce", "11-13 15:12", AGENT, "used for 3 toolchain PRs")],
    rels=mention("maya"))

add("s:no-force-push", "semantic", sem("kestrel", "must_not",
    "force-push to main or to any branch another person has pushed to",
    ev=[("human", "maya.chen/slack/2026-08-03T09:25", "08-03 09:25")], policy="manual_review"),
    sens="low", conf=0.99, scope="user-prefs", tags=["rule", "git", "safety"],
    at="08-03 09:48", sal=1.0, why="hard rule from Maya", pinned=True, policy="never",
    history=[("pin", "08-03 09:49", MAYA, "non-negotiable"),
             ("boost", "09-30 08:15", CURATOR, "operator raised salience to 1.2 after a near miss on feat/auth-mw", 1.2)],
    rels=mention("maya", "agent"))

add("e:user-pr-desc", "episodic", epi("review-orion-241", "10-01 17:40", [
    (0, "observation", "review comment on orion-billing#241 from Maya", ("gh", {"argv": ["pr", "view", "241", "--comments"]}, "Maya: 'Description is 40 lines. Why / what / how tested, 10 lines max.'")),
    (3, "tool_call", "rewrote the PR body", ("gh", {"argv": ["pr", "edit", "241", "--body-file", "pr-241.md"]}, "updated")),
    (5, "agent_turn", "noted the 10-line limit as a preference", None),
], env(ENV_ORION, pr=241), "success", ["orion-billing#241"]),
    sens="low", conf=0.9, scope="user-prefs", tags=["preferences", "pull-request"],
    at="10-01 17:46", sal=0.5, why="review feedback on PR style", rels=mention("maya", "repo-orion"))

add("s:pr-desc-short", "semantic", sem("maya", "prefers_pr_description",
    "at most 10 lines: why, what, how tested",
    ev=[("event", I("e:user-pr-desc"), "10-01 17:40")], policy="contest_on_conflict"),
    sens="low", conf=0.7, scope="user-prefs", tags=["preference", "pull-request"],
    at="10-01 17:50", sal=0.7, why="review comment on orion-billing#241",
    history=[("contest", "10-08 09:30", AGENT, "Dev wants full testing notes on pkg/auth PRs", "s:pr-desc-detailed")],
    rels=[("derived_from", "e:user-pr-desc", 0.8)] + mention("maya"))

add("s:work-hours", "semantic", sem("maya", "working_hours",
    {"tz": "Europe/Berlin", "day_starts": "09:00", "day_ends": "18:00", "no_review_requests_after": "Fri 15:00"},
    ev=[("human", "maya.chen/slack/2026-08-04T08:30", "08-04 08:30")]),
    sens="medium", conf=0.85, scope="user-prefs", tags=["preference", "schedule"],
    at="08-04 08:35", sal=0.65, why="so review requests land inside her day",
    history=[("reinforce", "10-16 14:55", AGENT, "held a review request until Monday")],
    rels=mention("maya"))

add("s:maya-phone", "semantic", sem("maya", "urgent_contact",
    {"channel": "Signal", "number": "+49 151 0000 FAKE-MOBILE-MAYA", "use_when": "prod incident and pager unanswered"},
    ev=[("human", "maya.chen/dm/2026-08-04T08:40", "08-04 08:40")], policy="manual_review"),
    sens="high", conf=0.9, scope="user-prefs", tags=["contact", "people"],
    at="08-04 08:42", sal=0.5, why="given for emergencies only", policy="manual_only",
    dec=decay(half_life=180 * DAY, min_salience=0.1), rels=mention("maya"))

add("s:test-before-commit", "semantic", sem("kestrel", "must_run_before_commit",
    {"go": "go test ./... && golangci-lint run", "python": "uv run pytest -q && ruff check ."},
    ev=[("human", "maya.chen/slack/2026-08-03T09:27", "08-03 09:27")]),
    sens="low", conf=0.95, scope="user-prefs", tags=["rule", "testing"],
    at="08-03 09:50", sal=0.85, why="Maya's working agreement",
    history=[("reinforce", "09-26 10:05", AGENT, "caught 3 unprotected handlers before pushing"),
             ("fork", "10-21 12:10", AGENT, "orion needs alembic check too", "s:test-before-commit-orion"),
             ("reinforce", "11-19 09:45", AGENT, "ran before the rate-limiter commit")],
    rels=mention("maya"))

add("s:test-before-commit-orion", "semantic", sem("kestrel", "must_run_before_commit",
    {"python": "uv run pytest -q -x && ruff check . && uv run alembic check"},
    conditions={"repo": "examplecorp/orion-billing"}, mode="conditional",
    ev=[("observation", "orion-billing/Makefile:precommit", "10-21 12:05")]),
    sens="low", conf=0.9, scope="project-orion", tags=["rule", "testing", "migrations"],
    at="10-21 12:10", sal=0.8, why="forked from the general rule for orion's migrations",
    forked_from="s:test-before-commit",
    history=[("reinforce", "11-08 17:00", AGENT, "alembic check caught a missing downgrade")],
    rels=mention("repo-orion", "alembic"))

add("s:status-updates", "semantic", sem("maya", "prefers_status_updates",
    "terse bullet list, blockers first, no emoji",
    ev=[("human", "maya.chen/slack/2026-08-11T17:02", "08-11 17:02")]),
    sens="low", conf=0.72, scope="user-prefs", tags=["preference", "communication"],
    at="08-11 17:05", sal=0.6, why="inferred from two of Maya's replies",
    dec=decay(curve="linear", half_life=60 * DAY, min_salience=0.05),
    history=[("reinforce", "10-16 17:30", AGENT, "weekly summary in this format got a thumbs-up")],
    rels=mention("maya"))

add("w:dotfiles", "working", work("onboard-2026-08-03", "done",
    [("preference", "editor", "editor-agnostic configs only", True),
     ("preference", "python_line_length", 100, True)],
    [], [],
    "Onboarding finished: preferences captured, scaffolds cleaned of editor folders."),
    sens="low", conf=0.9, scope="user-prefs", tags=["onboarding"], at="08-03 09:55",
    sal=0.6, why="onboarding thread state",
    dec=decay(curve="linear", half_life=2 * DAY, min_salience=0.0, gain=0.25),
    history=[("revise", "09-12 15:35", AGENT, "line length constraint updated to 100")],
    rels=[("derived_from", "e:onboarding", 0.7)])


# =============================================================================================
# Unscoped tool knowledge: ripgrep, pytest, docker, terraform, git, GitHub Actions
# =============================================================================================

add("s:rg-gitignore", "semantic", sem("ripgrep", "respects_by_default", [".gitignore", ".ignore", ".rgignore"],
    ev=[("tool", "rg --debug", "08-10 11:00")]),
    sens="public", conf=0.97, scope="", tags=["tool", "ripgrep", "search"], at="08-10 11:05",
    sal=0.7, why="observed in rg --debug output",
    dec=decay(half_life=180 * DAY, min_salience=0.05),
    history=[("reinforce", "09-18 14:05", AGENT, "vendor/ was skipped as expected"),
             ("reinforce", "10-22 10:00", AGENT, "needed -uu to see generated migrations")],
    rels=mention("ripgrep"))

add("s:rg-hidden", "semantic", sem("ripgrep", "unrestricted_flags",
    {"--hidden": "search dotfiles", "-u": "ignore .gitignore", "-uu": "-u plus hidden",
     "-uuu": "-uu plus binary files"},
    ev=[("tool", "rg --help", "08-10 11:02")]),
    sens="public", conf=0.95, scope="", tags=["tool", "ripgrep", "search"], at="08-10 11:08",
    sal=0.65, why="flag reference", dec=decay(half_life=180 * DAY, min_salience=0.05),
    history=[("reinforce", "09-02 10:00", AGENT, "used -uu to find .vscode folders")],
    rels=mention("ripgrep"))

add("s:rg-wrong-L", "semantic", sem("ripgrep", "short_flag_for_files_with_matches", "-L",
    ev=[("observation", "agent-recall", "08-10 11:10")]),
    sens="public", conf=0.55, scope="", tags=["tool", "ripgrep"], at="08-10 11:12",
    sal=0.5, why="recalled from memory without checking",
    history=[("retract", "08-22 16:40", CURATOR, "wrong: -L is --follow (symlinks); files-with-matches is -l")],
    rels=mention("ripgrep"))

add("s:rg-files-with-matches", "semantic", sem("ripgrep", "short_flag_for_files_with_matches", "-l",
    ev=[("tool", "rg --help", "08-22 16:35")]),
    sens="public", conf=0.98, scope="", tags=["tool", "ripgrep"], at="08-22 16:41",
    sal=0.7, why="checked rg --help after a wrong command", dec=decay(half_life=180 * DAY, min_salience=0.05),
    history=[("reinforce", "09-18 14:03", AGENT, "listed RequireJWT call sites with rg -l")],
    rels=[("contradicts", "s:rg-wrong-L", 1.0)] + mention("ripgrep"))

add("s:pytest-lf", "semantic", sem("pytest", "rerun_failures_flags",
    {"--lf": "run only the tests that failed last time", "--ff": "run failures first, then the rest",
     "-x": "stop at first failure"},
    ev=[("tool", "pytest --help", "08-12 10:00")]),
    sens="public", conf=0.97, scope="", tags=["tool", "pytest", "testing"], at="08-12 10:05",
    sal=0.65, why="flag reference", dec=decay(half_life=120 * DAY, min_salience=0.05),
    history=[("reinforce", "10-09 14:20", AGENT, "--lf while reproducing the refresh flake")],
    rels=mention("pytest"))

add("s:pytest-randomly", "semantic", sem("pytest-randomly", "reproduce_order_with",
    "pytest -p randomly --randomly-seed=<seed from the session header>",
    ev=[("tool", "ci-run-88121/log:3", "09-29 10:40")]),
    sens="public", conf=0.9, scope="", tags=["tool", "pytest", "flaky-test"], at="09-29 11:20",
    sal=0.7, why="needed to replay the CI order locally",
    history=[("reinforce", "10-09 14:25", AGENT, "replayed seed 1729384 locally")],
    rels=mention("pytest"))

add("s:pytest-repeat", "semantic", sem("pytest-repeat", "stress_a_flaky_test",
    "pytest --count=200 -x -p no:randomly -k <test name>",
    ev=[("event", "flake-2026-10-09:n2", "10-09 14:30")]),
    sens="public", conf=0.88, scope="", tags=["tool", "pytest", "flaky-test"], at="10-09 15:10",
    sal=0.7, why="how the refresh flake was reproduced",
    history=[("reinforce", "11-17 16:40", AGENT, "reused for the flaky-test recipe")],
    rels=mention("pytest"))

add("e:docker-cache", "episodic", epi("docker-cache-2026-09-08", "09-08 13:10", [
    (0, "observation", "alpha e2e image build takes 6m40s on every commit", None),
    (3, "tool_call", "inspected build cache usage", ("docker", {"argv": ["buildx", "build", "--progress=plain", "-f", "tests/e2e/Dockerfile", "."]}, "step 4/9 COPY . . invalidates go mod download")),
    (9, "tool_call", "reordered COPY go.mod/go.sum before sources, added cache mounts", ("edit_file", {"path": "tests/e2e/Dockerfile", "hunks": 2}, "applied")),
    (12, "tool_call", "rebuilt after touching a .go file", ("docker", {"argv": ["buildx", "build", "--progress=plain", "-f", "tests/e2e/Dockerfile", "."]}, "cached layers 1-5; 48s")),
    (14, "agent_turn", "build time 6m40s -> 48s on source-only changes", None),
], env(ENV_ALPHA, branch="ci/e2e-build-cache"), "success", ["alpha-gateway#391"]),
    sens="public", conf=0.95, scope="", tags=["docker", "ci", "performance"], at="09-08 13:25",
    sal=0.6, why="build cache investigation", rels=mention("docker", "repo-alpha"))

add("s:docker-copy-order", "semantic", sem("docker", "layer_cache_rule",
    "COPY go.mod and go.sum and run go mod download before COPY of the sources",
    ev=[("event", I("e:docker-cache"), "09-08 13:22")]),
    sens="public", conf=0.94, scope="", tags=["tool", "docker", "performance"], at="09-08 13:30",
    sal=0.75, why="6m40s -> 48s in alpha e2e image builds",
    history=[("reinforce", "10-25 11:00", AGENT, "same fix applied to payments-api image")],
    rels=[("derived_from", "e:docker-cache", 0.9)] + mention("docker"))

add("s:docker-buildkit-cache", "semantic", sem("docker", "cache_mount_requires",
    "# syntax=docker/dockerfile:1.4 (or newer) and RUN --mount=type=cache,target=/root/.cache/go-build",
    ev=[("event", I("e:docker-cache"), "09-08 13:19")]),
    sens="public", conf=0.9, scope="", tags=["tool", "docker"], at="09-08 13:32",
    sal=0.6, why="cache mounts were ignored without the syntax directive",
    rels=[("derived_from", "e:docker-cache", 0.8), ("supports", "s:docker-copy-order", 0.6)] + mention("docker"))

add("s:git-bisect", "semantic", sem("git", "bisect_automation",
    {"command": "git bisect run ./scripts/repro.sh", "exit_125": "skip this commit", "exit_0": "good", "exit_1_to_127": "bad"},
    ev=[("tool", "git help bisect", "08-26 10:00")]),
    sens="public", conf=0.93, scope="", tags=["tool", "git", "debugging"], at="08-26 10:10",
    sal=0.55, why="used to find the commit that slowed alpha startup",
    dec=decay(half_life=180 * DAY, min_salience=0.05))

add("s:gh-concurrency", "semantic", sem("GitHub Actions", "concurrency_cancel_in_progress",
    "cancels superseded runs of the same group; never enable it for pushes to main",
    ev=[("observation", "examplecorp/alpha-gateway/actions/runs/88519", "10-04 09:00")]),
    sens="public", conf=0.85, scope="", tags=["ci", "github-actions"], at="10-04 09:10",
    sal=0.6, why="a main build was cancelled by a merge queue push",
    rels=mention("gh-actions"))

add("s:gh-runner-cpu", "semantic", sem("GitHub-hosted ubuntu-22.04 runner", "vcpu_count", 4,
    mode="conditional", conditions={"repo_visibility": "public"},
    ev=[("tool", "ci-run-88121/nproc", "09-29 10:41")]),
    sens="public", conf=0.75, scope="", tags=["ci", "github-actions"], at="09-29 11:25",
    sal=0.5, why="nproc in CI logs; private repos got 2 vCPU in older plans",
    rels=mention("gh-actions"))

add("s:go-toolchain", "semantic", sem("examplecorp Go repositories", "toolchain_version", "go1.23.3",
    mode="timeboxed", start="11-13 15:00",
    ev=[("event", "toolchain-2026-11-13", "11-13 15:00")]),
    sens="low", conf=0.88, scope="", tags=["go", "toolchain"], at="11-13 15:20",
    sal=0.75, why="all three Go repos bumped together",
    rels=[("derived_from", "e:go-toolchain", 0.9)] + mention("repo-alpha"))

add("s:priya-approval", "semantic", sem("secret rotations", "require_approval_from", "Priya Raman (security lead)",
    ev=[("human", "security-policy.md#rotations", "08-20 13:00")], policy="manual_review"),
    sens="low", conf=0.95, scope="", tags=["security", "process"], at="08-20 13:10",
    sal=0.8, why="security policy", dec=decay(half_life=180 * DAY, min_salience=0.2),
    history=[("reinforce", "11-12 10:20", AGENT, "JWT rotation is waiting on this"),
             ("reinforce", "11-16 09:00", AGENT, "AWS key rotation approved by Priya")],
    rels=mention("priya", "vault"))

add("s:vault-readonly", "semantic", sem("kestrel", "vault_access", "read-only on secret/alpha, secret/orion, secret/infra; writes need a human",
    ev=[("observation", "vault token lookup", "08-20 13:20")]),
    sens="medium", conf=0.9, scope="", tags=["security", "secrets"], at="08-20 13:25",
    sal=0.7, why="vault policy kestrel-ro", rels=mention("vault", "agent"))


# =============================================================================================
# project-alpha: auth middleware refactor (Go), flaky e2e test in CI, JWT key rotation
# =============================================================================================

A = "project-alpha"

add("s:alpha-auth-old", "semantic", sem("alpha-gateway", "auth_enforced_by",
    "per-handler RequireJWT() calls (37 call sites in 14 files)",
    ev=[("tool", "rg -l RequireJWT --type go", "08-05 12:30")]),
    sens="low", conf=0.9, scope=A, tags=["auth", "architecture", "go"], at="08-05 12:35",
    sal=0.7, why="read while mapping the repository",
    history=[("reinforce", "09-18 14:02", AGENT, "confirmed while planning the refactor"),
             ("superseded", "10-15 17:00", AGENT, "PR #418 merged: one middleware now", "s:alpha-auth-new")],
    rels=mention("repo-alpha"))

add("e:alpha-auth-explore", "episodic", epi("alpha-auth-2026-09-18", "09-18 13:50", [
    (0, "user_message", "Maya: 'Replace the per-handler RequireJWT calls with one middleware. Keep /healthz open.'", None),
    (2, "tool_call", "listed call sites", ("rg", {"argv": ["-l", "RequireJWT\\(", "--type", "go"]}, "37 call sites in 14 files")),
    (5, "tool_call", "listed routes", ("rg", {"argv": ["-n", "r\\.(Get|Post|Put|Delete)\\(", "internal/router"]}, "52 routes; public: /healthz, /readyz, /v1/auth/login"), []),
    (8, "tool_call", "read the validator", ("read_file", {"path": "pkg/auth/jwt.go"}, "ValidateToken(ctx, raw) (*Claims, error); leeway 5s"), [1]),
    (12, "tool_call", "baseline tests", ("go", {"argv": ["test", "./pkg/auth/..."]}, "ok  github.com/examplecorp/alpha-gateway/pkg/auth 0.41s"), [3]),
    (16, "agent_turn", "plan: auth.Middleware(validator, Exempt(...)) mounted once in router.go; one PR", None),
], env(ENV_ALPHA, branch="feat/auth-mw", ticket="ALPHA-212"), "success", ["notes/alpha-auth-plan.md"]),
    sens="low", conf=0.95, scope=A, tags=["auth", "refactor", "go"], at="09-18 14:07",
    sal=0.6, why="start of the auth middleware refactor",
    rels=mention("repo-alpha", "auth-mw", "ripgrep", "maya"))

add("e:alpha-auth-impl", "episodic", epi("alpha-auth-2026-09-24", "09-24 10:00", [
    (0, "agent_turn", "implementing auth.Middleware with an exemption list", None),
    (2, "tool_call", "wrote the middleware", ("write_file", {"path": "pkg/auth/middleware.go", "lines": 84}, "written")),
    (20, "tool_call", "wrote table-driven tests (11 cases)", ("write_file", {"path": "pkg/auth/middleware_test.go", "lines": 162}, "written"), []),
    (24, "tool_call", "ran the new tests with -race", ("go", {"argv": ["test", "-race", "-run", "TestMiddleware", "./pkg/auth"]}, "ok 0.62s"), [1, 2]),
    (30, "tool_call", "mounted the middleware", ("edit_file", {"path": "internal/router/router.go"}, "r.Use(auth.Middleware(v, auth.Exempt(\"/healthz\", \"/readyz\", \"/v1/auth/login\")))"), [3]),
    (35, "tool_call", "built everything", ("go", {"argv": ["build", "./..."]}, "ok")),
], env(ENV_ALPHA, branch="feat/auth-mw", ticket="ALPHA-212"), "success", ["pkg/auth/middleware.go", "pkg/auth/middleware_test.go"]),
    sens="low", conf=0.95, scope=A, tags=["auth", "refactor", "go"], at="09-24 10:36",
    sal=0.6, why="middleware implemented", rels=mention("auth-mw", "repo-alpha"))

add("e:alpha-auth-tests-fail", "episodic", epi("alpha-auth-2026-09-26a", "09-26 09:30", [
    (0, "tool_call", "full test run", ("go", {"argv": ["test", "./..."]}, "FAIL internal/handlers: TestAdminExport, TestWebhookReplay, TestUsageReport expected 401, got 200")),
    (4, "tool_call", "looked for the odd handlers", ("rg", {"argv": ["-n", "r\\.Route\\(\"/admin\"", "internal/router"]}, "router.go:71 admin sub-router created before r.Use")),
    (8, "agent_turn", "the /admin sub-router bypasses the middleware; paused for standup before fixing", None),
], env(ENV_ALPHA, branch="feat/auth-mw"), "failure", []),
    sens="low", conf=0.95, scope=A, tags=["auth", "refactor", "tests"], at="09-26 09:38",
    sal=0.65, why="regression found by the full suite", rels=mention("auth-mw"))

add("e:alpha-auth-subrouter", "episodic", epi("alpha-auth-2026-09-26b", "09-26 10:40", [
    (0, "tool_call", "mounted the middleware on the admin sub-router", ("edit_file", {"path": "internal/router/router.go", "line": 71}, "admin.Use(auth.Middleware(v))")),
    (3, "tool_call", "added a test that every non-exempt route returns 401 without a token", ("write_file", {"path": "internal/router/routes_auth_test.go", "lines": 58}, "written"), []),
    (6, "tool_call", "full test run", ("go", {"argv": ["test", "./..."]}, "ok (52 routes checked)"), [1, 2]),
    (8, "tool_call", "lint", ("golangci-lint", {"argv": ["run"]}, "0 issues")),
], env(ENV_ALPHA, branch="feat/auth-mw"), "success", ["internal/router/routes_auth_test.go"]),
    sens="low", conf=0.95, scope=A, tags=["auth", "refactor", "tests"], at="09-26 10:49",
    sal=0.6, why="fixed the admin sub-router gap",
    rels=[("derived_from", "e:alpha-auth-tests-fail", 0.8)] + mention("auth-mw"))

add("e:alpha-auth-pr", "episodic", epi("alpha-auth-2026-10-02", "10-02 15:00", [
    (0, "tool_call", "opened the PR", ("gh", {"argv": ["pr", "create", "--base", "main", "--title", "feat(auth): single JWT middleware"]}, "https://github.com/examplecorp/alpha-gateway/pull/418")),
    (24, "tool_call", "watched CI", ("gh", {"argv": ["run", "watch", "88407"]}, "e2e failed: test_refresh_rotates_token")),
    (27, "tool_call", "read the failure", ("gh", {"argv": ["run", "view", "88407", "--log-failed"]}, "assert new_token != old_token")),
    (29, "tool_call", "re-ran failed jobs", ("gh", {"argv": ["run", "rerun", "88407", "--failed"]}, "passed on attempt 2")),
    (52, "agent_turn", "PR green after a rerun; flagged the flake as unrelated to the refactor", None),
], env(ENV_CI, pr=418, run=88407), "partial", ["alpha-gateway#418"]),
    sens="low", conf=0.9, scope=A, tags=["auth", "ci", "flaky-test", "pull-request"], at="10-02 15:52",
    sal=0.6, why="PR opened; CI flaked",
    rels=mention("repo-alpha", "flaky-test", "ci-workflow"))

add("e:alpha-auth-review", "episodic", epi("alpha-auth-2026-10-07", "10-07 16:20", [
    (0, "observation", "review from Dev Patel on #418", ("gh", {"argv": ["pr", "view", "418", "--comments"]}, "Dev: 'table test for exempt routes; list every command you ran under Testing'")),
    (5, "tool_call", "added exempt-route cases", ("edit_file", {"path": "pkg/auth/middleware_test.go", "added_cases": 4}, "applied")),
    (8, "tool_call", "tests", ("go", {"argv": ["test", "-race", "./pkg/auth/...", "./internal/router/..."]}, "ok")),
    (10, "tool_call", "pushed and updated the description", ("gh", {"argv": ["pr", "edit", "418", "--body-file", "pr-418.md"]}, "updated")),
], env(ENV_ALPHA, pr=418), "success", ["alpha-gateway#418"]),
    sens="low", conf=0.95, scope=A, tags=["auth", "code-review"], at="10-07 16:31",
    sal=0.55, why="review round 1", rels=mention("dev", "auth-mw"))

add("s:pr-desc-detailed", "semantic", sem("alpha PRs touching pkg/auth", "require_pr_section",
    "Testing notes listing every command run and its result",
    mode="conditional", conditions={"paths": ["pkg/auth/**"], "reviewer": "@dpatel"},
    ev=[("event", I("e:alpha-auth-review"), "10-07 16:20")]),
    sens="low", conf=0.85, scope=A, tags=["pull-request", "code-review", "auth"], at="10-08 09:30",
    sal=0.7, why="Dev Patel's review rule on pkg/auth",
    rels=[("derived_from", "e:alpha-auth-review", 0.9), ("contradicts", "s:pr-desc-short", 0.5)] + mention("dev"))

add("e:alpha-auth-merge", "episodic", epi("alpha-auth-2026-10-15", "10-15 16:40", [
    (0, "observation", "PR #418 approved by Dev Patel", None),
    (2, "tool_call", "merged with squash", ("gh", {"argv": ["pr", "merge", "418", "--squash", "--delete-branch"]}, "merged as 5e0c9d1")),
    (12, "tool_call", "watched the staging rollout", ("kubectl", {"argv": ["rollout", "status", "deploy/alpha-gateway", "-n", "alpha-staging"]}, "successfully rolled out (2/2)")),
    (15, "tool_call", "smoke test without a token", ("curl", {"argv": ["-s", "-o", "/dev/null", "-w", "%{http_code}", "https://alpha-staging.example.com/v1/usage"]}, "401")),
    (16, "tool_call", "smoke test of /healthz", ("curl", {"argv": ["-s", "-o", "/dev/null", "-w", "%{http_code}", "https://alpha-staging.example.com/healthz"]}, "200"), [2]),
    (20, "agent_turn", "refactor live on staging; prod follows the Thursday train", None),
], env(ENV_ALPHA, pr=418, commit="5e0c9d1"), "success", ["alpha-gateway@5e0c9d1"]),
    sens="low", conf=0.97, scope=A, tags=["auth", "deploy", "refactor"], at="10-15 17:00",
    sal=0.7, why="refactor merged and deployed to staging",
    rels=mention("alpha-svc", "auth-mw", "dev"))

add("s:alpha-auth-new", "semantic", sem("alpha-gateway", "auth_enforced_by",
    {"middleware": "auth.Middleware", "mounted_in": "internal/router/router.go",
     "also_mounted_on": ["/admin sub-router"],
     "exempt_routes": ["/healthz", "/readyz", "/v1/auth/login"]},
    ev=[("event", I("e:alpha-auth-merge"), "10-15 16:42"), ("tool", "go test ./internal/router -run TestRoutesRequireAuth", "09-26 10:46")]),
    sens="low", conf=0.95, scope=A, tags=["auth", "architecture", "go"], at="10-15 17:00",
    sal=0.9, why="refactor merged", supersedes="s:alpha-auth-old",
    history=[("reinforce", "11-19 09:35", AGENT, "rate limiter is mounted after auth")],
    rels=[("derived_from", "e:alpha-auth-merge", 0.9), ("derived_from", "e:alpha-auth-subrouter", 0.7)]
    + mention("auth-mw", "repo-alpha"))

add("s:alpha-token-ttl", "semantic", sem("alpha-gateway tokens", "ttl",
    {"access_s": 900, "refresh_s": 1209600, "refresh_tokens": "single use, rotated on refresh"},
    ev=[("tool", "rg -n 'TTL' pkg/auth/config.go", "09-18 14:00")]),
    sens="low", conf=0.9, scope=A, tags=["auth", "config"], at="09-18 14:10",
    sal=0.65, why="read from pkg/auth/config.go", rels=mention("auth-mw"))

add("s:alpha-jwt-leeway", "semantic", sem("alpha-gateway JWT validation", "leeway_seconds", 30,
    ev=[("tool", "alpha-gateway#421 diff", "10-10 17:30")]),
    sens="low", conf=0.9, scope=A, tags=["auth", "config", "flaky-test"], at="10-10 17:55",
    sal=0.7, why="raised from 5s in the flake fix",
    rels=mention("auth-mw"))

add("s:alpha-owners", "semantic", sem("pkg/auth/**", "code_owners", ["@dpatel", "@mchen-dev"],
    ev=[("observation", "alpha-gateway/.github/CODEOWNERS", "09-18 14:04")]),
    sens="public", conf=0.97, scope=A, tags=["ownership", "auth"], at="09-18 14:12",
    sal=0.6, why="CODEOWNERS", rels=mention("dev", "maya"))

add("s:alpha-rate-limit", "semantic", sem("alpha-gateway rate limiter", "defaults",
    {"rps_per_key": 100, "burst": 200, "algorithm": "token bucket (golang.org/x/time/rate)",
     "eviction": "none (limiter map grows without bound)"},
    ev=[("tool", "rg -n 'rate.NewLimiter' internal/ratelimit", "11-19 09:22")]),
    sens="low", conf=0.85, scope=A, tags=["rate-limit", "config", "go"], at="11-19 09:30",
    sal=0.85, why="read while starting the rate-limiter fix", rels=mention("alpha-svc"))

add("s:alpha-staging-admin", "semantic", sem("alpha staging admin endpoint", "location",
    {"url": "https://admin.alpha-staging.FAKE-internal.example:8443", "basic_auth_user": "ops-admin",
     "allowlist": "VPN range 10.40.0.0/16"},
    ev=[("observation", "alpha-gateway/deploy/staging/values.yaml", "10-15 16:55")], policy="manual_review"),
    sens="high", conf=0.85, scope=A, tags=["staging", "internal"], at="10-15 17:05",
    sal=0.45, why="needed to verify the rollout", rels=mention("alpha-svc"))

add("s:alpha-llm-key", "semantic", sem("alpha e2e summarizer tests", "OPENAI_API_KEY",
    "sk-FAKE-test-0000000000000000000000alpha",
    mode="conditional", conditions={"env": "ci", "job": "e2e-llm"},
    ev=[("observation", "ci secret listing", "10-02 15:20")], policy="manual_review"),
    sens="hyper", conf=0.8, scope=A, tags=["secret", "ci"], at="10-02 15:22",
    sal=0.4, why="seen in a CI debug dump; kept only to detect future leaks", policy="manual_only",
    dec=decay(half_life=60 * DAY, min_salience=0.0))

add("s:alpha-jwt-secret", "semantic", sem("alpha staging JWT signing key", "value",
    {"kid": "staging-2026-08", "alg": "HS256", "secret": "FAKE-JWT-HS256-alpha-staging-7f3e-not-real"},
    mode="timeboxed", start="08-01 00:00",
    ev=[("tool", "vault kv get secret/alpha/staging/jwt-signing", "11-12 09:45")], policy="manual_review"),
    sens="hyper", conf=0.9, scope=A, tags=["secret", "auth"], at="11-12 09:46",
    sal=0.6, why="read during rotation prep", policy="manual_only",
    dec=decay(half_life=30 * DAY, min_salience=0.0),
    rels=mention("jwt-key", "vault"))

# --- the flaky e2e test -------------------------------------------------------------------

add("e:ci-flake-first", "episodic", epi("flake-2026-09-29", "09-29 10:35", [
    (0, "observation", "main CI run 88121 red: e2e job", None),
    (1, "tool_call", "pulled the failing log", ("gh", {"argv": ["run", "view", "88121", "--log-failed"]}, "tests/e2e/test_token_refresh.py::test_refresh_rotates_token FAILED assert new_token != old_token")),
    (3, "tool_call", "found the random seed", ("rg", {"argv": ["-o", "randomly-seed=\\d+", "run-88121.log"]}, "randomly-seed=1729384")),
    (4, "tool_call", "checked history of the test", ("gh", {"argv": ["run", "list", "--workflow", "ci.yml", "--limit", "200", "--json", "conclusion"]}, "15 of 200 runs failed on this test"), []),
    (8, "agent_turn", "flaky, not caused by the last commit; opened ALPHA-230", None),
], env(ENV_CI, run=88121, branch="main"), "failure", ["ALPHA-230"]),
    sens="low", conf=0.95, scope=A, tags=["ci", "flaky-test", "pytest"], at="09-29 10:43",
    sal=0.6, why="first sighting of the refresh flake",
    rels=mention("flaky-test", "ci-workflow", "gh-actions"))

add("s:alpha-flake-rate", "semantic", sem("test_refresh_rotates_token", "failure_rate_before_fix",
    {"runs": 200, "failures": 15, "rate": 0.075},
    mode="timeboxed", start="09-12 00:00", end="10-10 18:00",
    ev=[("tool", "gh run list --workflow ci.yml --limit 200", "09-29 10:39")]),
    sens="public", conf=0.9, scope=A, tags=["ci", "flaky-test", "metrics"], at="09-29 10:45",
    sal=0.5, why="counted from the last 200 runs",
    rels=[("derived_from", "e:ci-flake-first", 0.9)] + mention("flaky-test"))

add("e:ci-flake-quarantine", "episodic", epi("flake-2026-10-04", "10-04 09:30", [
    (0, "agent_turn", "PR #418 keeps re-running for an unrelated flake; quarantining the test", None),
    (2, "tool_call", "marked the test", ("edit_file", {"path": "tests/e2e/test_token_refresh.py", "decorator": "@pytest.mark.quarantine(reason='ALPHA-230')"}, "applied")),
    (4, "tool_call", "made CI report quarantined tests without failing", ("edit_file", {"path": ".github/workflows/ci.yml", "step": "pytest -m 'not quarantine' && pytest -m quarantine || true"}, "applied")),
    (9, "tool_call", "opened PR", ("gh", {"argv": ["pr", "create", "--title", "ci: quarantine test_refresh_rotates_token (ALPHA-230)"]}, "https://github.com/examplecorp/alpha-gateway/pull/420")),
], env(ENV_ALPHA, ticket="ALPHA-230"), "success", ["alpha-gateway#420"]),
    sens="low", conf=0.9, scope=A, tags=["ci", "flaky-test", "quarantine"], at="10-04 09:40",
    sal=0.5, why="unblocked the auth PR", rels=mention("flaky-test", "ci-workflow"))

add("s:flake-cause-port", "semantic", sem("test_refresh_rotates_token flake", "caused_by",
    "port 8081 collision between two compose stacks on the same runner",
    ev=[("observation", "run-88121.log: bind: address already in use (earlier job)", "10-03 11:00")],
    policy="supersede_on_conflict"),
    sens="low", conf=0.45, scope=A, tags=["ci", "flaky-test", "hypothesis"], at="10-03 10:55",
    sal=0.5, why="first hypothesis",
    history=[("superseded", "10-10 18:00", AGENT, "reproduction shows identical tokens, not a bind error", "s:flake-cause-exp")],
    rels=mention("flaky-test"))

add("e:ci-flake-port", "episodic", epi("flake-2026-10-03", "10-03 11:00", [
    (0, "agent_turn", "testing the port-collision hypothesis", None),
    (3, "tool_call", "switched compose to ephemeral host ports", ("edit_file", {"path": "tests/e2e/docker-compose.yml", "change": "8081:8080 -> 8080"}, "applied")),
    (6, "tool_call", "20 CI reruns", ("gh", {"argv": ["workflow", "run", "ci.yml", "--ref", "exp/ephemeral-ports", "-f", "repeat=20"]}, "2 of 20 failed, same assertion")),
    (40, "agent_turn", "ports are not the cause", None),
], env(ENV_CI, branch="exp/ephemeral-ports"), "failure", []),
    sens="low", conf=0.9, scope=A, tags=["ci", "flaky-test", "experiment"], at="10-03 11:40",
    sal=0.45, why="hypothesis test",
    rels=[("contradicts", "s:flake-cause-port", 0.9)] + mention("flaky-test"))

add("s:flake-cause-skew", "semantic", sem("test_refresh_rotates_token flake", "caused_by",
    "clock skew between the runner and the compose containers",
    ev=[("tool", "docker compose exec gateway date +%s.%N", "10-05 10:05")], policy="contest_on_conflict"),
    sens="low", conf=0.4, scope=A, tags=["ci", "flaky-test", "hypothesis"], at="10-05 10:20",
    sal=0.45, why="second hypothesis (Jonas suggested it)",
    history=[("contest", "10-10 18:05", AGENT, "skew is 0.3s at most; the repro points at exp granularity", "s:flake-cause-exp")],
    rels=[("derived_from", "e:ci-flake-skew", 0.5)] + mention("flaky-test", "jonas"))

add("e:ci-flake-skew", "episodic", epi("flake-2026-10-05", "10-05 10:00", [
    (0, "tool_call", "measured clocks", ("docker", {"argv": ["compose", "exec", "gateway", "date", "+%s.%N"]}, "runner 1728122400.118, container 1728122400.402")),
    (2, "tool_call", "checked NTP sync on the runner", ("timedatectl", {"argv": ["show", "-p", "NTPSynchronized"]}, "NTPSynchronized=yes"), []),
    (4, "agent_turn", "skew about 0.3s; too small to explain a token equality, inconclusive", None),
], env(ENV_CI, branch="exp/clock-skew"), "partial", []),
    sens="public", conf=0.85, scope=A, tags=["ci", "flaky-test", "experiment"], at="10-05 10:06",
    sal=0.4, why="clock measurement",
    rels=mention("flaky-test"))

add("e:ci-flake-repro", "episodic", epi("flake-2026-10-09", "10-09 14:15", [
    (0, "tool_call", "replayed the CI order", ("pytest", {"argv": ["-p", "randomly", "--randomly-seed=1729384", "tests/e2e"]}, "1 failed, 47 passed")),
    (15, "tool_call", "stressed the single test", ("pytest", {"argv": ["--count=200", "-p", "no:randomly", "-k", "test_refresh_rotates_token", "tests/e2e"]}, "14 failed, 186 passed"), []),
    (40, "tool_call", "logged both tokens on failure", ("edit_file", {"path": "tests/e2e/test_token_refresh.py", "add": "print(jwt.decode(old), jwt.decode(new))"}, "applied")),
    (44, "tool_call", "reran", ("pytest", {"argv": ["--count=200", "-x", "-p", "no:randomly", "-k", "test_refresh_rotates_token", "tests/e2e"]}, "failed at 23: identical iat/exp, no jti -> identical token")),
    (50, "agent_turn", "root cause: tokens minted in the same second are byte-identical", None),
], env(ENV_ALPHA, branch="fix/alpha-230"), "success", ["notes/alpha-230-repro.md"]),
    sens="low", conf=0.95, scope=A, tags=["ci", "flaky-test", "pytest", "root-cause"], at="10-09 15:05",
    sal=0.7, why="reliable reproduction",
    rels=mention("flaky-test", "pytest"))

add("e:ci-flake-fix", "episodic", epi("flake-2026-10-10", "10-10 16:30", [
    (0, "tool_call", "added a random jti and millisecond iat", ("edit_file", {"path": "pkg/auth/issue.go", "hunks": 2}, "applied")),
    (6, "tool_call", "raised validation leeway to 30s", ("edit_file", {"path": "pkg/auth/config.go", "change": "Leeway: 5s -> 30s"}, "applied"), []),
    (10, "tool_call", "unit tests", ("go", {"argv": ["test", "-race", "./pkg/auth/..."]}, "ok"), [1, 2]),
    (30, "tool_call", "500 stress runs", ("pytest", {"argv": ["--count=500", "-p", "no:randomly", "-k", "test_refresh_rotates_token", "tests/e2e"]}, "500 passed")),
    (62, "tool_call", "removed the quarantine and opened the PR", ("gh", {"argv": ["pr", "create", "--title", "fix(auth): unique jti so refreshed tokens always differ (ALPHA-230)"]}, "https://github.com/examplecorp/alpha-gateway/pull/421")),
    (90, "observation", "PR #421 merged by Maya", None),
], env(ENV_ALPHA, branch="fix/alpha-230", ticket="ALPHA-230"), "success", ["alpha-gateway#421"]),
    sens="low", conf=0.97, scope=A, tags=["ci", "flaky-test", "fix", "auth"], at="10-10 18:00",
    sal=0.75, why="flake fixed",
    rels=[("derived_from", "e:ci-flake-repro", 0.9)] + mention("flaky-test", "auth-mw"))

add("s:flake-cause-exp", "semantic", sem("test_refresh_rotates_token flake", "caused_by",
    "tokens minted within the same second had identical iat/exp and no jti, so the refreshed token equalled the old one",
    ev=[("event", I("e:ci-flake-repro"), "10-09 14:59"), ("event", I("e:ci-flake-fix"), "10-10 17:00")]),
    sens="low", conf=0.92, scope=A, tags=["ci", "flaky-test", "root-cause"], at="10-10 18:00",
    sal=0.85, why="reproduced 14/200 and fixed 0/500", supersedes="s:flake-cause-port",
    history=[("reinforce", "10-12 09:00", AGENT, "no failures in 60 CI runs since the fix"),
             ("reinforce", "11-17 16:45", AGENT, "cited in the recipe for the new burst flake")],
    rels=[("derived_from", "e:ci-flake-repro", 0.9), ("derived_from", "e:ci-flake-fix", 0.9),
          ("supports", "s:alpha-jwt-leeway", 0.6)] + mention("flaky-test"))

# --- November: a second flake, handled with the recipe -----------------------------------------

add("e:ci-flake-burst-1", "episodic", epi("flake-2026-11-17", "11-17 15:30", [
    (0, "observation", "main CI run 91877 red: test_rate_limit_burst", None),
    (2, "tool_call", "pulled the failing log", ("gh", {"argv": ["run", "view", "91877", "--log-failed"]}, "assert 429 in statuses -- got only 200s")),
    (4, "tool_call", "found the seed", ("rg", {"argv": ["-o", "randomly-seed=\\d+", "run-91877.log"]}, "randomly-seed=5520917")),
    (10, "tool_call", "stressed the test", ("pytest", {"argv": ["--count=200", "-p", "no:randomly", "-k", "test_rate_limit_burst", "tests/e2e"]}, "9 failed, 191 passed")),
    (55, "tool_call", "timed the burst", ("pytest", {"argv": ["-k", "test_rate_limit_burst", "--durations=0"]}, "burst of 250 requests spans 1.3s on 2 vCPU; bucket refills meanwhile"), [3]),
    (70, "agent_turn", "flaky for a timing reason; test must send the burst concurrently", None),
], env(ENV_CI, run=91877, branch="main"), "partial", ["ALPHA-261"]),
    sens="low", conf=0.9, scope=A, tags=["ci", "flaky-test", "pytest", "rate-limit"], at="11-17 16:40",
    sal=0.8, why="recipe 'debug flaky pytest e2e test' applied",
    rels=mention("ci-workflow", "pytest", "alpha-svc"))

add("e:ci-flake-burst-2", "episodic", epi("flake-2026-11-19", "11-19 07:40", [
    (0, "tool_call", "reserved a quiet self-hosted runner", ("ssh", {"host": "ci-runner-07.build.FAKE-internal.example", "cmd": "sudo systemctl stop actions.runner.alpha.service"}, "runner drained")),
    (6, "tool_call", "ran the stress loop on the runner", ("pytest", {"argv": ["--count=500", "-p", "no:randomly", "-k", "test_rate_limit_burst"]}, "21 failed, 479 passed")),
    (18, "tool_call", "sent the burst with asyncio.gather", ("edit_file", {"path": "tests/e2e/test_rate_limit.py", "change": "sequential loop -> httpx.AsyncClient + gather"}, "applied")),
    (24, "tool_call", "stress again", ("pytest", {"argv": ["--count=500", "-p", "no:randomly", "-k", "test_rate_limit_burst"]}, "500 passed")),
    (30, "tool_call", "re-registered the runner", ("ssh", {"host": "ci-runner-07.build.FAKE-internal.example", "cmd": "./config.sh --token FAKE-GH-RUNNER-REG-TOKEN-A1B2 --labels alpha"}, "runner online")),
], env(ENV_CI, branch="fix/alpha-261", runner="self-hosted"), "success", ["alpha-gateway#447"]),
    sens="high", conf=0.92, scope=A, tags=["ci", "flaky-test", "pytest", "self-hosted"], at="11-19 08:10",
    sal=0.85, why="recipe v2 on the self-hosted pool",
    rels=[("derived_from", "e:ci-flake-burst-1", 0.8)] + mention("pytest"))

# --- competence: the selector scenario (see README) --------------------------------------------

FLAKY_TRIGGERS = [
    ("ci_test_failed", {"framework": "pytest", "failure_rate_between": [0.005, 0.3]}),
    ("user_message", {"contains_any": ["flaky", "flake", "intermittent"]}),
]

add("c:flaky-pytest-v1", "competence", comp("debug flaky pytest e2e test", FLAKY_TRIGGERS, [
    ("pull the failing run log", "gh", {"run_id": "int"}, "log contains the failing nodeid"),
    ("extract the pytest-randomly seed", "rg", {"pattern": "str", "file": "path"}, "one seed found"),
    ("replay the CI order locally", "pytest", {"seed": "int", "path": "str"}, "same test fails"),
    ("stress the single test", "pytest", {"count": "int", "k": "str"}, "failure rate measured (n >= 200)"),
    ("instrument the assertion and find the timing dependency", "edit_file", {"path": "str"}, "root cause written down"),
    ("fix and verify", "pytest", {"count": 500}, "0 failures in 500 runs"),
], ["gh", "rg", "pytest", "pytest-randomly", "pytest-repeat"],
    ["seed replay passes because the flake depends on wall-clock time",
     "hosted runners too noisy to reproduce a sub-second race"],
    ["run the stress loop on a drained self-hosted runner",
     "quarantine with @pytest.mark.quarantine and open a ticket"],
    (31, 5, 2460000, "11-17 16:40"), "1.3"),
    sens="low", conf=0.82, scope=A, tags=["skill", "ci", "flaky-test", "pytest"], at="10-12 09:30",
    sal=0.7, why="consolidated from the ALPHA-230 episodes", by=CONSOL,
    dec=decay(half_life=120 * DAY, min_salience=0.1, gain=0.1),
    history=[("reinforce", "10-20 11:00", AGENT, "worked on orion's flaky test_invoice_rounding"),
             ("fork", "10-24 10:00", AGENT, "variant for self-hosted runners", "c:flaky-pytest-v2"),
             ("penalize", "11-03 09:00", AGENT, "seed replay did not reproduce a wall-clock flake", 0.05),
             ("reinforce", "11-17 16:40", AGENT, "isolated test_rate_limit_burst in 70 minutes")],
    rels=[("derived_from", "e:ci-flake-repro", 0.9), ("derived_from", "e:ci-flake-fix", 0.9),
          ("derived_from", "e:ci-flake-first", 0.6)] + mention("pytest", "flaky-test"))

add("c:flaky-pytest-v2", "competence", comp("debug flaky pytest e2e test", FLAKY_TRIGGERS + [
    ("ci_runner_label", {"any_of": ["self-hosted", "alpha"]}),
], [
    ("pull the failing run log", "gh", {"run_id": "int"}, "log contains the failing nodeid"),
    ("drain a self-hosted runner", "ssh", {"host": "ci-runner-07.build.FAKE-internal.example", "cmd": "str"}, "runner idle"),
    ("stress on the drained runner", "pytest", {"count": 500, "k": "str"}, "failure rate measured"),
    ("make the test independent of wall-clock timing", "edit_file", {"path": "str"}, "diff reviewed"),
    ("verify 500 runs", "pytest", {"count": 500}, "0 failures"),
    ("re-register the runner", "ssh", {"cmd": "./config.sh --token FAKE-GH-RUNNER-REG-TOKEN-A1B2 --labels alpha"}, "runner online"),
], ["gh", "ssh", "pytest", "pytest-repeat"],
    ["runner registration token expired (1 h lifetime)", "runner left drained if the session dies"],
    ["fall back to v1 on hosted runners", "ask Jonas for a fresh registration token"],
    (47, 6, 1980000, "11-19 08:10"), "2.0"),
    sens="high", conf=0.86, scope=A, tags=["skill", "ci", "flaky-test", "pytest", "self-hosted"],
    at="10-24 10:00", sal=0.75, why="forked from v1 for the self-hosted pool", by=AGENT,
    forked_from="c:flaky-pytest-v1",
    dec=decay(half_life=120 * DAY, min_salience=0.1, gain=0.1),
    history=[("reinforce", "11-06 15:00", AGENT, "fixed orion's test_webhook_retry in 40 minutes"),
             ("reinforce", "11-19 08:10", AGENT, "fixed test_rate_limit_burst")],
    rels=[("derived_from", "e:ci-flake-burst-2", 0.8, "11-19 08:10")] + mention("pytest", "jonas"))

add("c:rotate-jwt-key", "competence", comp("rotate alpha staging JWT signing key", [
    ("schedule", {"every_days": 90, "env": "staging"}),
    ("security_request", {"from": "Priya Raman"}),
], [
    ("read the current key and kid", "vault", {"path": "secret/alpha/staging/jwt-signing"}, "kid staging-2026-08, value FAKE-JWT-HS256-alpha-staging-7f3e-not-real"),
    ("generate a 256-bit key", "openssl", {"argv": ["rand", "-base64", "32"]}, "44 base64 chars"),
    ("write new kid next to the old one", "vault", {"path": "secret/alpha/staging/jwt-signing", "keys": ["current", "previous"]}, "both kids readable"),
    ("roll the gateway", "kubectl", {"argv": ["rollout", "restart", "deploy/alpha-gateway", "-n", "alpha-staging"]}, "2/2 ready"),
    ("drop the previous kid after 24 h", "vault", {"path": "str"}, "old tokens rejected"),
], ["vault", "openssl", "kubectl"],
    ["tokens signed with the old kid rejected before clients refresh", "vault write denied (kestrel is read-only)"],
    ["ask Maya or Priya to perform the vault write", "extend the overlap window to 48 h"],
    (2, 0, 5400000, "08-14 11:00"), "1.0"),
    sens="hyper", conf=0.75, scope=A, tags=["skill", "auth", "secret-rotation"], at="08-14 11:30",
    sal=0.6, why="learned from the August rotation", by=CONSOL, policy="manual_only",
    history=[("reinforce", "11-12 10:05", AGENT, "retrieved for the November rotation")],
    rels=mention("jwt-key", "vault", "priya"))

# --- plans -----------------------------------------------------------------------------------

add("p:alpha-auth-rollout", "plan_graph", plan("alpha-auth-middleware-rollout", "1.1",
    "Replace scattered per-handler auth checks with one middleware and roll it out safely",
    {"max_prs": 1, "keep_public_routes": ["/healthz", "/readyz", "/v1/auth/login"], "no_force_push": True},
    {"repo": "string", "legacy_symbol": "string", "exempt_routes": "list[string]"},
    {"pr_url": "string", "staging_verified": "bool"},
    [("inventory", "search_call_sites", {"tool": "rg", "args": ["-l", "{legacy_symbol}"]}, {}),
     ("implement", "write_middleware", {"path": "pkg/auth/middleware.go"}, {}),
     ("unit", "run_tests", {"cmd": "go test -race ./pkg/auth/..."}, {"require": "exit_code == 0"}),
     ("mount", "edit_router", {"path": "internal/router/router.go", "include_subrouters": True}, {}),
     ("route-audit", "run_tests", {"cmd": "go test ./internal/router -run TestRoutesRequireAuth"}, {"require": "every non-exempt route returns 401"}),
     ("pr", "open_pr", {"sections": ["Why", "What", "Testing"]}, {"require": "lint clean"}),
     ("staging", "deploy", {"env": "staging", "smoke": ["401 without token", "200 on /healthz"]}, {"require": "pr merged"}),
     ("prod", "deploy", {"env": "prod", "canary": [10, 50, 100]}, {"require": "staging smoke green for 24h", "approval": "maya"})],
    [("inventory", "implement", "data"), ("implement", "unit", "control"), ("inventory", "mount", "data"),
     ("unit", "mount", "control"), ("mount", "route-audit", "control"), ("route-audit", "pr", "control"),
     ("pr", "staging", "control"), ("staging", "prod", "control")],
    (19440000, 0.25, 4, "10-15 17:00")),
    sens="low", conf=0.85, scope=A, tags=["plan", "auth", "rollout"], at="10-16 09:00",
    sal=0.75, why="extracted from the ALPHA-212 tool graphs", by=CONSOL,
    dec=decay(half_life=240 * DAY, min_salience=0.1, gain=0.1),
    history=[("revise", "10-16 09:30", CONSOL, "added route-audit node after the /admin sub-router miss")],
    rels=[("derived_from", "e:alpha-auth-explore", 0.7), ("derived_from", "e:alpha-auth-subrouter", 0.8),
          ("derived_from", "e:alpha-auth-merge", 0.7)] + mention("auth-mw"))

add("p:alpha-flaky-quarantine", "plan_graph", plan("flaky-test-quarantine-and-fix", "2.0",
    "Keep main green while a flaky test is diagnosed and fixed",
    {"quarantine_max_days": 14, "ticket_required": True},
    {"nodeid": "string", "run_id": "int"}, {"fix_pr": "string", "unquarantined": "bool"},
    [("detect", "classify_failure", {"history_runs": 200}, {"require": "failure not caused by the PR diff"}),
     ("quarantine", "mark_test", {"marker": "quarantine", "ci_step": "pytest -m quarantine || true"}, {}),
     ("ticket", "open_ticket", {"project": "ALPHA"}, {}),
     ("reproduce", "apply_competence", {"skill": "debug flaky pytest e2e test"}, {"timeout_h": 8}),
     ("fix", "open_pr", {}, {"require": "0 failures in 500 runs"}),
     ("unquarantine", "remove_marker", {}, {"require": "fix merged"})],
    [("detect", "quarantine", "control"), ("detect", "ticket", "data"), ("ticket", "reproduce", "data"),
     ("reproduce", "fix", "data"), ("fix", "unquarantine", "control"), ("quarantine", "unquarantine", "control")],
    (172800000, 0.2, 5, "11-19 08:10")),
    sens="medium", conf=0.8, scope=A, tags=["plan", "ci", "flaky-test"], at="10-12 10:00",
    sal=0.7, why="extracted from ALPHA-230", by=CONSOL,
    history=[("reinforce", "11-19 08:20", AGENT, "ALPHA-261 followed it")],
    rels=[("derived_from", "e:ci-flake-quarantine", 0.8), ("derived_from", "e:ci-flake-fix", 0.8)]
    + mention("flaky-test"))

# --- working state ---------------------------------------------------------------------------

add("w:alpha-auth", "working", work("alpha-auth-refactor", "done",
    [("rule", "no_force_push", True, True), ("scope", "paths", ["pkg/auth/**", "internal/router/**"], True),
     ("review", "reviewer", "@dpatel", True)],
    [], [],
    "ALPHA-212 done: auth.Middleware replaces 37 RequireJWT calls; merged as 5e0c9d1, on staging since Oct 15, prod on Oct 16."),
    sens="low", conf=0.95, scope=A, tags=["auth", "refactor"], at="09-18 14:08", sal=0.8,
    why="thread opened", dec=decay(half_life=2 * DAY, min_salience=0.0, gain=0.25),
    history=[("revise", "09-24 10:40", AGENT, "state executing: middleware implemented"),
             ("revise", "09-26 10:50", AGENT, "admin sub-router fixed"),
             ("revise", "10-02 15:55", AGENT, "state waiting: PR #418 in review"),
             ("reinforce", "10-07 16:35", AGENT, "review round 1 addressed"),
             ("revise", "10-15 17:02", AGENT, "state done: merged and deployed")],
    rels=[("derived_from", "e:alpha-auth-merge", 0.9, "10-15 17:02"), ("mentions_entity", "ent:dev", 0.7, "10-07 16:35")]
    + mention("auth-mw"))

add("w:alpha-flaky", "working", work("alpha-flaky-ci", "done",
    [("process", "quarantine_ticket", "ALPHA-230", True)],
    ["watch main CI for a week"], [],
    "ALPHA-230 fixed by PR #421 (unique jti); quarantine removed; 0 failures in 60 runs."),
    sens="low", conf=0.9, scope=A, tags=["ci", "flaky-test"], at="09-29 10:44", sal=0.8,
    why="thread opened", dec=decay(curve="linear", half_life=36 * HOUR, min_salience=0.0, gain=0.25),
    history=[("revise", "10-04 09:42", AGENT, "state waiting: quarantined"),
             ("revise", "10-10 18:05", AGENT, "state done: fix merged")],
    rels=[("derived_from", "e:ci-flake-fix", 0.9, "10-10 18:05")] + mention("flaky-test"))

add("w:alpha-burst", "working", work("alpha-flaky-burst", "waiting",
    [("process", "ticket", "ALPHA-261", True), ("ci", "required_green_runs", 50, True)],
    ["check the 50 scheduled CI reruns of #447", "ask Dev to review #447"],
    ["should the burst test run on hosted runners at all?"],
    "test_rate_limit_burst made concurrent in #447; 500/500 locally on the drained runner, waiting for CI reruns."),
    sens="low", conf=0.85, scope=A, tags=["ci", "flaky-test", "rate-limit"], at="11-17 16:45", sal=0.7,
    why="thread opened", history=[("revise", "11-19 08:15", AGENT, "fix pushed; waiting for reruns")],
    rels=[("derived_from", "e:ci-flake-burst-1", 0.8)] + mention("ci-workflow"))

add("e:alpha-ratelimit", "episodic", epi("alpha-ratelimit-2026-11-19", "11-19 09:15", [
    (0, "user_message", "Maya: 'gateway RSS grows ~40MB/day; I suspect the per-key limiter map.'", None),
    (3, "tool_call", "found the limiter map", ("rg", {"argv": ["-n", "rate.NewLimiter", "internal/ratelimit"]}, "limiter.go:22 limiters[key] = rate.NewLimiter(100, 200) -- never evicted")),
    (9, "tool_call", "race test", ("go", {"argv": ["test", "-race", "-run", "TestLimiter", "./internal/ratelimit"]}, "WARNING: DATA RACE in (*Store).Get")),
    (20, "agent_turn", "two bugs: unbounded map and an unlocked read; plan an LRU with a mutex", None),
], env(ENV_ALPHA, branch="fix/ratelimit-lru", ticket="ALPHA-265"), "partial", []),
    sens="low", conf=0.9, scope=A, tags=["rate-limit", "memory-leak", "go"], at="11-19 09:35",
    sal=0.85, why="new task started", rels=mention("alpha-svc", "maya", "ripgrep"))

add("w:alpha-ratelimit", "working", work("alpha-ratelimit-lru", "executing",
    [("rule", "no_force_push", True, True), ("scope", "paths", ["internal/ratelimit/**"], True),
     ("deadline", "review_by", "2026-11-21", False), ("quality", "go_test_race", True, True)],
    ["replace map with an LRU (hashicorp/golang-lru/v2) capped at 100k keys", "add a benchmark",
     "run go test -race ./...", "open PR with Testing notes for Dev"],
    ["is 100k keys enough for the biggest tenant?", "evict by idle time or by LRU order?"],
    "Fixing unbounded per-key limiter map and a data race in internal/ratelimit (ALPHA-265)."),
    sens="low", conf=0.85, scope=A, tags=["rate-limit", "memory-leak", "go"], at="11-19 09:50", sal=0.95,
    why="thread opened", rels=[("derived_from", "e:alpha-ratelimit", 0.9)] + mention("alpha-svc"))

add("e:alpha-jwt-rotate", "episodic", epi("alpha-jwt-2026-11-12", "11-12 09:40", [
    (0, "agent_turn", "90-day rotation of the staging signing key is due", None),
    (4, "tool_call", "read the current key", ("vault", {"argv": ["kv", "get", "secret/alpha/staging/jwt-signing"]}, {"kid": "staging-2026-08", "value": "FAKE-JWT-HS256-alpha-staging-7f3e-not-real"})),
    (6, "tool_call", "generated the next key", ("openssl", {"argv": ["rand", "-base64", "32"]}, "FAKE-JWT-HS256-alpha-staging-9c1d-next"), []),
    (8, "tool_call", "tried to write it", ("vault", {"argv": ["kv", "put", "secret/alpha/staging/jwt-signing", "previous=...", "current=..."]}, "Error: permission denied (policy kestrel-ro)"), [1, 2]),
    (12, "user_message", "asked Priya for approval and a human vault write", None),
], env(ENV_ALPHA, ticket="SEC-88"), "partial", []),
    sens="hyper", conf=0.95, scope=A, tags=["secret-rotation", "auth", "vault"], at="11-12 09:52",
    sal=0.7, why="rotation attempt", policy="manual_only",
    rels=mention("jwt-key", "vault", "priya"))

add("w:alpha-jwt-rotation", "working", work("alpha-jwt-rotation", "blocked",
    [("approval", "security", "Priya Raman", True), ("access", "vault_write", "human only", True),
     ("window", "overlap_hours", 24, True)],
    ["after approval: Maya writes current/previous kids", "restart alpha-staging", "drop kid staging-2026-08 after 24 h"],
    ["do mobile clients cache the JWKS longer than 24 h?"],
    "Next staging key prepared (kid staging-2026-11, staged at /tmp/FAKE-jwt-staging-2026-11.key, not yet written); blocked on SEC-88 approval."),
    sens="high", conf=0.9, scope=A, tags=["secret-rotation", "auth"], at="11-12 09:55", sal=0.8,
    why="rotation blocked on approval",
    history=[("revise", "11-18 10:00", AGENT, "still waiting on SEC-88; pinged Priya")],
    rels=[("derived_from", "e:alpha-jwt-rotate", 0.9)] + mention("priya", "jwt-key"))


# =============================================================================================
# project-orion: PostgreSQL 13 -> 16, invoices.tenant_id NOT NULL, throttled backfill
# =============================================================================================

O = "project-orion"

add("s:orion-pg13", "semantic", sem("orion-prod-db", "engine_version", "PostgreSQL 13.11",
    ev=[("observation", "infra-live/envs/prod-eu1/rds.tf:engine_version", "08-06 10:00")]),
    sens="low", conf=0.95, scope=O, tags=["postgres", "version"], at="08-06 10:05",
    sal=0.7, why="read from Terraform",
    history=[("reinforce", "10-14 09:40", AGENT, "confirmed with select version()"),
             ("superseded", "11-09 06:05", AGENT, "blue/green switchover to 16.4 completed", "s:orion-pg16")],
    rels=mention("orion-db", "postgres"))

add("e:orion-pg-inventory", "episodic", epi("orion-pg16-2026-10-14", "10-14 09:30", [
    (0, "user_message", "Maya: 'PG13 is EOL next year. Plan the upgrade to 16 with Sofia.'", None),
    (3, "tool_call", "server version", ("psql", {"argv": ["-c", "select version()"], "target": "orion-staging"}, "PostgreSQL 13.11 on x86_64-pc-linux-gnu")),
    (5, "tool_call", "installed extensions", ("psql", {"argv": ["-c", "select extname, extversion from pg_extension"]}, "pg_stat_statements 1.8, pgcrypto 1.3, pg_trgm 1.5"), []),
    (9, "tool_call", "raw SQL in the code base", ("rg", {"argv": ["-n", "--type", "py", "text\\(\"\"\"", "orion"]}, "12 raw SQL blocks, none using removed features"), []),
    (15, "agent_turn", "no blockers found; proposing snapshot rehearsal then blue/green", None),
], env(ENV_ORION, ticket="ORION-301"), "success", ["notes/orion-pg16-inventory.md"]),
    sens="low", conf=0.95, scope=O, tags=["postgres", "upgrade", "inventory"], at="10-14 09:45",
    sal=0.55, why="upgrade kickoff", rels=mention("orion-db", "postgres", "maya", "sofia"))

add("e:orion-pg-rehearsal", "episodic", epi("orion-pg16-2026-10-16", "10-16 13:00", [
    (0, "tool_call", "restored last night's snapshot to a scratch cluster", ("aws", {"argv": ["rds", "restore-db-cluster-from-snapshot", "--db-cluster-identifier", "orion-pg16-rehearsal"]}, "available after 38 min")),
    (45, "tool_call", "upgrade compatibility check", ("aws", {"argv": ["rds", "modify-db-cluster", "--engine-version", "16.4", "--allow-major-version-upgrade", "--apply-immediately"]}, "upgrade finished in 19 min")),
    (70, "tool_call", "test suite against the upgraded copy", ("pytest", {"argv": ["-q", "tests/integration"], "env": {"DATABASE_URL": "orion-pg16-rehearsal"}}, "412 passed, 3 skipped")),
    (95, "tool_call", "compared query plans of the top 20 statements", ("psql", {"argv": ["-f", "scripts/explain_top20.sql"]}, "2 plans regressed until ANALYZE; identical after")),
    (110, "agent_turn", "rehearsal green; upgrade needs ANALYZE right after switchover", None),
], env(ENV_ORION, ticket="ORION-301"), "success", ["notes/orion-pg16-rehearsal.md"]),
    sens="medium", conf=0.95, scope=O, tags=["postgres", "upgrade", "rehearsal"], at="10-16 14:50",
    sal=0.6, why="rehearsal on a snapshot", rels=mention("orion-db", "postgres"))

add("s:orion-pg16-notes", "semantic", sem("PostgreSQL 16 upgrade", "requires_follow_up",
    ["ANALYZE all tables right after pg_upgrade (planner statistics are not carried over)",
     "pg_stat_statements counters restart",
     "vacuum_defer_cleanup_age is gone from parameter groups"],
    ev=[("event", I("e:orion-pg-rehearsal"), "10-16 14:35")]),
    sens="public", conf=0.9, scope=O, tags=["postgres", "upgrade"], at="10-16 15:00",
    sal=0.7, why="learned in the rehearsal",
    history=[("reinforce", "11-09 06:00", AGENT, "ANALYZE fixed the invoice search plan after cutover")],
    rels=[("derived_from", "e:orion-pg-rehearsal", 0.9)] + mention("postgres"))

add("e:orion-migration-dryrun", "episodic", epi("orion-tenant-2026-10-21", "10-21 10:00", [
    (0, "tool_call", "ran the new migration on staging", ("alembic", {"argv": ["upgrade", "head"]}, "sqlalchemy.exc.InternalError: CREATE INDEX CONCURRENTLY cannot run inside a transaction block")),
    (4, "tool_call", "checked how other migrations do it", ("rg", {"argv": ["-n", "autocommit_block", "migrations/versions"]}, "no matches")),
    (8, "agent_turn", "migration 7c1e2f9a4b10 needs an autocommit block around the index", None),
], env(ENV_ORION, branch="feat/tenant-id", ticket="ORION-288"), "failure", []),
    sens="low", conf=0.95, scope=O, tags=["migrations", "alembic", "postgres"], at="10-21 10:09",
    sal=0.55, why="dry run failed", rels=mention("alembic", "invoices"))

add("e:orion-migration-dryrun2", "episodic", epi("orion-tenant-2026-10-22", "10-22 09:15", [
    (0, "tool_call", "wrapped the index in autocommit_block", ("edit_file", {"path": "migrations/versions/7c1e2f9a4b10_invoices_tenant_id.py"}, "with op.get_context().autocommit_block(): op.create_index(..., postgresql_concurrently=True)")),
    (3, "tool_call", "staging upgrade", ("alembic", {"argv": ["upgrade", "head"]}, "add column 0.02s; index concurrently 11m02s")),
    (16, "tool_call", "downgrade path", ("alembic", {"argv": ["downgrade", "-1"]}, "ok"), [2]),
    (18, "tool_call", "upgrade again", ("alembic", {"argv": ["upgrade", "head"]}, "ok")),
    (31, "tool_call", "checked for missing migrations", ("alembic", {"argv": ["check"]}, "No new upgrade operations detected.")),
], env(ENV_ORION, branch="feat/tenant-id", ticket="ORION-288"), "success", ["migrations/versions/7c1e2f9a4b10_invoices_tenant_id.py"]),
    sens="low", conf=0.95, scope=O, tags=["migrations", "alembic", "postgres"], at="10-22 09:46",
    sal=0.6, why="dry run fixed", rels=[("derived_from", "e:orion-migration-dryrun", 0.8)] + mention("alembic", "invoices"))

add("s:orion-concurrently", "semantic", sem("CREATE INDEX CONCURRENTLY", "cannot_run_inside",
    "a transaction block; in alembic wrap it in op.get_context().autocommit_block()",
    ev=[("event", I("e:orion-migration-dryrun"), "10-21 10:00"), ("event", I("e:orion-migration-dryrun2"), "10-22 09:18")]),
    sens="public", conf=0.97, scope=O, tags=["postgres", "alembic", "migrations"], at="10-22 10:00",
    sal=0.8, why="hit it in the ORION-288 dry run",
    history=[("reinforce", "11-08 16:35", AGENT, "used again for the validate step")],
    rels=[("derived_from", "e:orion-migration-dryrun", 0.9), ("derived_from", "e:orion-migration-dryrun2", 0.9)]
    + mention("alembic", "postgres"))

add("s:orion-alembic-head", "semantic", sem("orion-billing alembic", "head_revision", "7c1e2f9a4b10",
    mode="timeboxed", start="11-08 16:40",
    ev=[("tool", "alembic heads", "11-08 16:38")]),
    sens="low", conf=0.9, scope=O, tags=["alembic", "migrations"], at="11-08 16:40",
    sal=0.7, why="head after the NOT NULL step",
    dec=decay(curve="custom", half_life=30 * DAY, min_salience=0.0, points=TIMEBOXED_FACT),
    rels=mention("alembic", "repo-orion"))

add("s:orion-invoice-rows", "semantic", sem("billing.invoices", "row_count", 48213377,
    mode="timeboxed", start="10-20 10:00",
    ev=[("tool", "select reltuples from pg_class where relname = 'invoices'", "10-20 10:00")]),
    sens="medium", conf=0.8, scope=O, tags=["postgres", "capacity"], at="10-20 10:05",
    sal=0.55, why="sizing the backfill", rels=mention("invoices"))

add("s:orion-backfill-safe", "semantic", sem("invoices.tenant_id backfill", "safe_during_business_hours", True,
    ev=[("observation", "staging backfill: 48M rows in 3h, no alerts", "10-24 15:00")], policy="contest_on_conflict"),
    sens="medium", conf=0.6, scope=O, tags=["postgres", "backfill", "hypothesis"], at="10-24 15:10",
    sal=0.6, why="staging run looked harmless",
    history=[("contest", "10-28 16:00", AGENT, "prod replica lag hit 34s with 10k batches", "s:orion-repl-lag")],
    rels=mention("invoices", "orion-db"))

add("e:orion-backfill-lag", "episodic", epi("orion-backfill-2026-10-28", "10-28 14:00", [
    (0, "tool_call", "started the prod backfill", ("uv", {"argv": ["run", "scripts/backfill_tenant_id.py", "--batch", "10000"]}, "batch 1..57 ok")),
    (38, "observation", "Datadog: aws.rds.replica_lag 34s on orion-prod reader-1", None),
    (40, "user_message", "Sofia: 'Stop it. Lag over 10 s breaks the reporting replicas.'", None),
    (41, "tool_call", "stopped the backfill", ("kill", {"signal": "SIGINT", "pid": 48213}, "stopped after batch 61 (610k rows)")),
    (50, "agent_turn", "need throttling: smaller batches, sleep, and a lag guard", None),
], env(ENV_ORION, ticket="ORION-288"), "partial", ["dashboards/orion-db replica-lag 2026-10-28"]),
    sens="medium", conf=0.95, scope=O, tags=["postgres", "backfill", "replica-lag"], at="10-28 14:50",
    sal=0.7, why="backfill stopped by the DBA",
    rels=mention("orion-db", "invoices", "sofia"))

add("s:orion-repl-lag", "semantic", sem("backfill batches of 10k rows on orion-prod-db", "cause_replica_lag",
    {"batch_rows": 10000, "max_lag_s": 34, "threshold_s": 10},
    ev=[("event", I("e:orion-backfill-lag"), "10-28 14:38"), ("human", "sofia.alvarez/slack", "10-28 14:40")]),
    sens="medium", conf=0.93, scope=O, tags=["postgres", "backfill", "replica-lag"], at="10-28 16:00",
    sal=0.85, why="measured on prod, confirmed by Sofia",
    history=[("reinforce", "11-02 10:00", AGENT, "lag stayed under 4s with 2k batches")],
    rels=[("derived_from", "e:orion-backfill-lag", 0.9), ("contradicts", "s:orion-backfill-safe", 0.8)]
    + mention("orion-db", "sofia"))

add("s:orion-batch-size", "semantic", sem("invoices.tenant_id backfill", "safe_batch",
    {"rows": 2000, "sleep_ms": 250, "pause_if_lag_s_above": 5},
    ev=[("event", "orion-backfill-nightly", "11-02 06:00")]),
    sens="medium", conf=0.85, scope=O, tags=["postgres", "backfill"], at="11-02 10:05",
    sal=0.75, why="tuned over the first nights",
    rels=[("supports", "s:orion-repl-lag", 0.7), ("derived_from", "e:backfill-night-1", 0.6),
          ("derived_from", "e:backfill-night-2", 0.6), ("derived_from", "e:backfill-night-3", 0.6)] + mention("invoices"))

add("e:orion-not-null", "episodic", epi("orion-tenant-2026-11-08", "11-08 16:20", [
    (0, "tool_call", "checked the backfill is complete", ("psql", {"argv": ["-c", "select count(*) from billing.invoices where tenant_id is null"]}, "0")),
    (2, "tool_call", "added the check constraint without validation", ("psql", {"argv": ["-c", "alter table billing.invoices add constraint invoices_tenant_id_nn check (tenant_id is not null) not valid"]}, "ALTER TABLE (4 ms)")),
    (4, "tool_call", "validated it", ("psql", {"argv": ["-c", "alter table billing.invoices validate constraint invoices_tenant_id_nn"]}, "ALTER TABLE (6m12s, SHARE UPDATE EXCLUSIVE lock only)")),
    (12, "tool_call", "set NOT NULL (uses the validated check, no scan)", ("psql", {"argv": ["-c", "alter table billing.invoices alter column tenant_id set not null"]}, "ALTER TABLE (9 ms)")),
    (14, "tool_call", "dropped the redundant check", ("psql", {"argv": ["-c", "alter table billing.invoices drop constraint invoices_tenant_id_nn"]}, "ALTER TABLE")),
    (18, "tool_call", "recorded the migration", ("alembic", {"argv": ["stamp", "7c1e2f9a4b10"]}, "ok"), [4]),
], env(ENV_ORION, ticket="ORION-288"), "success", ["ORION-288"]),
    sens="low", conf=0.97, scope=O, tags=["postgres", "migrations", "schema"], at="11-08 16:38",
    sal=0.75, why="tenant_id is NOT NULL on prod", rels=mention("invoices", "sofia"))

add("e:orion-cutover", "episodic", epi("orion-pg16-2026-11-09", "11-09 02:00", [
    (0, "observation", "maintenance window opened (Sunday 02:00 UTC); Sofia on the bridge", None),
    (4, "tool_call", "created the blue/green deployment", ("aws", {"argv": ["rds", "create-blue-green-deployment", "--source", "orion-prod", "--target-engine-version", "16.4"]}, "green orion-prod-green-FAKE7q ready after 71 min")),
    (80, "tool_call", "switchover", ("aws", {"argv": ["rds", "switchover-blue-green-deployment", "--switchover-timeout", "300"]}, "writer endpoint orion-prod.cluster-FAKE01x.eu-central-1.rds.amazonaws.com now on 16.4 (downtime 41 s)")),
    (84, "tool_call", "ANALYZE", ("psql", {"argv": ["-c", "analyze verbose"]}, "done in 14m")),
    (100, "tool_call", "app health", ("kubectl", {"argv": ["-n", "orion", "rollout", "restart", "deploy/orion-billing"]}, "3/3 ready; error rate 0.0%"), [2]),
    (230, "agent_turn", "cutover complete; old blue kept 7 days", None),
], env(ENV_ORION, ticket="ORION-301", window="2026-11-09 02:00-04:00 UTC"), "success", ["ORION-301", "notes/orion-pg16-cutover.md"]),
    sens="high", conf=0.97, scope=O, tags=["postgres", "upgrade", "cutover"], at="11-09 05:50",
    sal=0.9, why="production upgrade done", policy="manual_only",
    dec=decay(curve="custom", half_life=7 * DAY, min_salience=0.0, points=INCIDENT_TAIL),
    rels=[("derived_from", "e:orion-pg-rehearsal", 0.7)] + mention("orion-db", "sofia", "postgres"))

add("s:orion-pg16", "semantic", sem("orion-prod-db", "engine_version", "PostgreSQL 16.4",
    ev=[("event", I("e:orion-cutover"), "11-09 03:20")]),
    sens="low", conf=0.98, scope=O, tags=["postgres", "version"], at="11-09 06:05",
    sal=0.9, why="switchover completed", supersedes="s:orion-pg13",
    history=[("reinforce", "11-16 09:30", AGENT, "old blue cluster deleted; 16.4 confirmed")],
    rels=[("derived_from", "e:orion-cutover", 0.9)] + mention("orion-db", "postgres"))

add("s:orion-db-host", "semantic", sem("orion-prod-db", "writer_endpoint",
    "orion-prod.cluster-FAKE01x.eu-central-1.rds.amazonaws.com:5432",
    ev=[("event", I("e:orion-cutover"), "11-09 03:20")], policy="manual_review"),
    sens="high", conf=0.95, scope=O, tags=["postgres", "internal", "endpoint"], at="11-09 06:06",
    sal=0.6, why="endpoint unchanged by switchover", policy="manual_only", rels=mention("orion-db"))

add("e:orion-db-creds", "episodic", epi("orion-pg16-2026-11-09b", "11-09 03:25", [
    (0, "tool_call", "checked the app role can log in on 16.4", ("psql", {"dsn": "postgresql://orion_app:hunter2-FAKE-not-a-real-secret@orion-prod.cluster-FAKE01x.eu-central-1.rds.amazonaws.com:5432/orion", "argv": ["-c", "select current_user"]}, "orion_app")),
    (1, "tool_call", "checked the replica role too", ("psql", {"dsn": "postgresql://orion_ro:hunter2-FAKE-readonly-not-real@orion-prod.cluster-ro-FAKE01x.eu-central-1.rds.amazonaws.com:5432/orion", "argv": ["-c", "select pg_is_in_recovery()"]}, "t"), []),
    (2, "tool_call", "checked scram", ("psql", {"argv": ["-c", "select rolname, left(rolpassword, 14) from pg_authid where rolname = 'orion_app'"]}, "SCRAM-SHA-256$")),
], env(ENV_ORION, ticket="ORION-301"), "success", []),
    sens="hyper", conf=0.95, scope=O, tags=["postgres", "credentials", "upgrade"], at="11-09 03:28",
    sal=0.5, why="credential check during cutover", policy="manual_only",
    rels=mention("orion-db"))

add("s:orion-db-password", "semantic", sem("orion_app database role", "password", "hunter2-FAKE-not-a-real-secret",
    ev=[("tool", "vault kv get secret/orion/prod/db", "11-09 03:24")], policy="manual_review"),
    sens="hyper", conf=0.9, scope=O, tags=["secret", "postgres", "credentials"], at="11-09 03:30",
    sal=0.5, why="kept for the cutover checklist", policy="manual_only",
    dec=decay(half_life=30 * DAY, min_salience=0.0),
    rels=[("derived_from", "e:orion-db-creds", 0.8)] + mention("orion-db", "vault"))

add("s:orion-maint-window", "semantic", sem("orion-prod-db", "maintenance_window",
    {"day": "Sunday", "from": "02:00", "to": "04:00", "tz": "UTC", "approver": "Sofia Alvarez"},
    ev=[("human", "sofia.alvarez/slack", "10-14 10:00")], policy="manual_review"),
    sens="low", conf=0.97, scope=O, tags=["postgres", "process", "schedule"], at="10-14 10:10",
    sal=0.9, why="DBA rule", pinned=True, policy="manual_only",
    history=[("pin", "10-14 10:11", SOFIA, "every migration plan must see this")],
    rels=mention("orion-db", "sofia"))

add("e:orion-post-upgrade", "episodic", epi("orion-pg16-2026-11-09c", "11-09 06:00", [
    (0, "observation", "p95 of GET /v1/invoices/search 180ms -> 950ms right after switchover", None),
    (2, "tool_call", "checked the plan", ("psql", {"argv": ["-c", "explain analyze select ... from billing.invoices where ..."]}, "seq scan: stale statistics")),
    (4, "agent_turn", "ANALYZE still running for invoices; waited", None),
    (18, "tool_call", "re-checked", ("psql", {"argv": ["-c", "explain analyze ..."]}, "index scan on invoices_tenant_id_created_at_idx, 3.1 ms")),
], env(ENV_ORION, ticket="ORION-301"), "success", []),
    sens="medium", conf=0.95, scope=O, tags=["postgres", "performance", "upgrade"], at="11-09 06:18",
    sal=0.6, why="post-upgrade latency blip",
    rels=[("supports", "s:orion-pg16-notes", 0.8)] + mention("orion-db"))

add("e:orion-stripe", "episodic", epi("orion-stripe-2026-11-11", "11-11 11:00", [
    (0, "user_message", "Maya: 'invoice.paid webhooks are 400ing on staging since Friday.'", None),
    (3, "tool_call", "replayed the event locally", ("stripe", {"argv": ["listen", "--api-key", "sk_test_FAKE_51orion0000000000000000", "--forward-to", "localhost:8000/webhooks/stripe"]}, "400: signature mismatch")),
    (9, "tool_call", "found the parsing change", ("rg", {"argv": ["-n", "construct_event", "orion/webhooks"]}, "stripe_webhook.py:31 reads request.json() instead of raw body")),
    (15, "tool_call", "fixed and tested", ("pytest", {"argv": ["-q", "tests/webhooks"]}, "18 passed")),
], env(ENV_ORION, branch="fix/stripe-raw-body", ticket="ORION-310"), "success", ["orion-billing#262"]),
    sens="hyper", conf=0.95, scope=O, tags=["stripe", "webhooks", "bugfix"], at="11-11 11:20",
    sal=0.6, why="webhook fix", policy="manual_only", rels=mention("repo-orion", "maya"))

add("s:orion-stripe-key", "semantic", sem("orion Stripe test mode", "secret_key", "sk_test_FAKE_51orion0000000000000000",
    mode="conditional", conditions={"env": "staging"},
    ev=[("tool", "vault kv get secret/orion/staging/stripe", "11-11 11:02")], policy="manual_review"),
    sens="hyper", conf=0.9, scope=O, tags=["secret", "stripe"], at="11-11 11:05",
    sal=0.45, why="needed for stripe listen", policy="manual_only",
    dec=decay(half_life=30 * DAY, min_salience=0.0), rels=mention("vault"))

add("w:orion-stripe", "working", work("orion-stripe-webhook", "done",
    [("env", "stripe_mode", "test", True), ("secret", "STRIPE_API_KEY", "sk_test_FAKE_51orion0000000000000000", True)],
    [], [],
    "ORION-310 fixed: webhook handler verifies the raw body again (#262 merged)."),
    sens="hyper", conf=0.9, scope=O, tags=["stripe", "webhooks"], at="11-11 11:00", sal=0.7,
    why="thread opened", policy="manual_only",
    history=[("revise", "11-11 11:22", AGENT, "state done")],
    rels=[("derived_from", "e:orion-stripe", 0.9, "11-11 11:22")])

# --- competence and plans ------------------------------------------------------------------

add("c:orion-not-null", "competence", comp("add a NOT NULL column to a large Postgres table without downtime", [
    ("migration_review", {"operation": "ADD COLUMN ... NOT NULL", "table_rows_over": 1000000}),
], [
    ("add the column as NULL", "alembic", {"revision": "str"}, "migration runs in < 1 s"),
    ("deploy code that writes the column", "gh", {"pr": "int"}, "new rows have the column set"),
    ("backfill in throttled batches", "uv", {"script": "scripts/backfill_*.py", "batch": 2000}, "0 NULL rows"),
    ("add CHECK (col IS NOT NULL) NOT VALID", "psql", {"sql": "str"}, "instant"),
    ("VALIDATE CONSTRAINT", "psql", {"sql": "str"}, "no ACCESS EXCLUSIVE lock taken"),
    ("SET NOT NULL, then drop the check", "psql", {"sql": "str"}, "column is NOT NULL"),
], ["alembic", "psql", "uv"],
    ["ALTER ... SET NOT NULL before validation scans the table under ACCESS EXCLUSIVE",
     "backfill too fast: replica lag"],
    ["split VALIDATE to the maintenance window", "use the throttled backfill recipe"],
    (3, 1, 7200000, "11-08 16:38"), "1.1"),
    sens="medium", conf=0.88, scope=O, tags=["skill", "postgres", "migrations"], at="10-22 10:10",
    sal=0.7, why="consolidated from ORION-288", by=CONSOL,
    history=[("revise", "11-08 16:45", CONSOL, "added the NOT VALID / VALIDATE steps"),
             ("reinforce", "11-08 16:46", AGENT, "prod run went as planned")],
    rels=[("derived_from", "e:orion-not-null", 0.9, "11-08 16:45"), ("derived_from", "e:orion-migration-dryrun2", 0.7)]
    + mention("invoices", "alembic"))

add("c:orion-backfill", "competence", comp("throttled batched backfill watching replica lag", [
    ("task", {"kind": "backfill", "rows_over": 1000000}),
], [
    ("size batches from the table's write rate", "psql", {"sql": "str"}, "batch <= 2000 rows"),
    ("run with sleep between batches", "uv", {"batch": "int", "sleep_ms": "int"}, "progress logged"),
    ("pause when replica lag > 5 s", "datadog", {"metric": "aws.rds.replica_lag"}, "lag under threshold"),
    ("resume from the last id", "uv", {"resume_from": "int"}, "no gaps"),
], ["uv", "psql", "datadog"],
    ["reporting replicas break above 10 s lag", "long-running transaction blocks autovacuum"],
    ["run only inside the maintenance window"],
    (9, 2, 10800000, "11-06 05:30"), "1.2"),
    sens="low", conf=0.84, scope=O, tags=["skill", "postgres", "backfill"], at="10-29 09:00",
    sal=0.7, why="after the Oct 28 replica-lag stop", by=CONSOL,
    history=[("reinforce", "11-06 05:35", AGENT, "final night finished")],
    rels=[("derived_from", "e:orion-backfill-lag", 0.9)] + mention("orion-db"))

add("c:orion-rg-sql", "competence", comp("find raw SQL touching a table", [
    ("task", {"kind": "schema_change", "needs": "call sites"}),
], [
    ("search raw SQL strings", "rg", {"argv": ["-n", "--type", "py", "-e", "FROM\\s+billing\\.{table}", "-e", "text\\("]}, "list of files"),
    ("search ORM usages", "rg", {"argv": ["-n", "-w", "{Model}", "orion"]}, "list of files"),
    ("include generated migrations", "rg", {"argv": ["-uu", "-n", "{table}", "migrations"]}, "nothing hidden by .gitignore"),
], ["rg"], ["dynamic table names built with f-strings"], ["grep the pg_stat_statements top 500"],
    (14, 1, 90000, "10-20 10:10"), "1.0"),
    sens="public", conf=0.9, scope=O, tags=["skill", "search", "ripgrep"], at="10-14 10:30",
    sal=0.6, why="used at every schema change", by=CONSOL,
    rels=[("derived_from", "e:orion-pg-inventory", 0.6)] + mention("ripgrep"))

add("c:orion-pg-rehearsal", "competence", comp("rehearse a major Postgres upgrade on a snapshot restore", [
    ("task", {"kind": "major_version_upgrade", "engine": "postgres"}),
], [
    ("restore the latest snapshot", "aws", {"snapshot": "rds:orion-prod-2026-10-16-FAKE-snap"}, "cluster available"),
    ("upgrade the copy", "aws", {"engine_version": "str"}, "upgrade completes"),
    ("run integration tests", "pytest", {"path": "tests/integration"}, "all pass"),
    ("diff plans of top statements", "psql", {"file": "scripts/explain_top20.sql"}, "no regression after ANALYZE"),
    ("delete the copy", "aws", {}, "no stray cluster billed"),
], ["aws", "psql", "pytest"], ["extensions not available on the target version"],
    ["use pg_upgrade --check on a self-managed copy"],
    (2, 0, 7800000, "11-08 12:00"), "1.0"),
    sens="high", conf=0.8, scope=O, tags=["skill", "postgres", "upgrade"], at="10-16 15:10",
    sal=0.6, why="from the Oct 16 rehearsal", by=CONSOL,
    rels=[("derived_from", "e:orion-pg-rehearsal", 0.9)] + mention("orion-db"))

NOT_NULL_IO = ({"table": "string", "column": "string", "type": "string"}, {"migration_ids": "list[string]"})

add("p:orion-not-null-v1", "plan_graph", plan("add-not-null-column", "1.0",
    "Add a required column to an existing table",
    {"downtime_allowed": False}, *NOT_NULL_IO,
    [("migration", "write_migration", {"op": "add_column(nullable=False, server_default=...)"}, {}),
     ("index", "write_migration", {"op": "create_index(concurrently=True)"}, {}),
     ("staging", "alembic_upgrade", {"env": "staging"}, {}),
     ("prod", "alembic_upgrade", {"env": "prod"}, {"require": "maintenance window"}),
     ("verify", "run_tests", {"cmd": "pytest tests/integration"}, {})],
    [("migration", "index", "control"), ("index", "staging", "control"), ("staging", "prod", "control"),
     ("prod", "verify", "control")],
    (1800000, 0.5, 2, "10-21 10:09")),
    sens="low", conf=0.5, scope=O, tags=["plan", "migrations", "postgres"], at="10-20 11:00",
    sal=0.6, why="first draft", by=AGENT,
    history=[("penalize", "10-21 10:15", AGENT, "failed: concurrent index inside a transaction", 0.2),
             ("superseded", "10-23 09:00", AGENT, "expand/contract version replaces it", "p:orion-not-null-v2")])

add("p:orion-not-null-v2", "plan_graph", plan("add-not-null-column", "2.0",
    "Add a required column to a large table with expand/contract and no long locks",
    {"downtime_allowed": False, "max_lock_ms": 2000, "replica_lag_max_s": 5}, *NOT_NULL_IO,
    [("expand", "write_migration", {"op": "add_column(nullable=True)"}, {}),
     ("index", "write_migration", {"op": "create_index(concurrently=True)", "autocommit_block": True}, {}),
     ("dual-write", "deploy", {"change": "application writes the column"}, {"require": "staging green"}),
     ("backfill", "apply_competence", {"skill": "throttled batched backfill watching replica lag"}, {"require": "replica_lag_s < 5"}),
     ("check", "run_sql", {"sql": "ADD CONSTRAINT ... CHECK (... IS NOT NULL) NOT VALID"}, {"require": "0 NULL rows"}),
     ("validate", "run_sql", {"sql": "VALIDATE CONSTRAINT"}, {}),
     ("contract", "run_sql", {"sql": "SET NOT NULL; DROP CONSTRAINT"}, {})],
    [("expand", "index", "control"), ("expand", "dual-write", "control"), ("dual-write", "backfill", "control"),
     ("backfill", "check", "data"), ("check", "validate", "control"), ("validate", "contract", "control"),
     ("index", "backfill", "control")],
    (1209600000, 0.0, 3, "11-08 16:40")),
    sens="low", conf=0.9, scope=O, tags=["plan", "migrations", "postgres"], at="10-23 09:00",
    sal=0.75, why="rewritten after the dry runs", by=AGENT, supersedes="p:orion-not-null-v1",
    history=[("reinforce", "11-08 16:45", AGENT, "completed on prod")],
    rels=[("derived_from", "e:orion-migration-dryrun2", 0.8), ("derived_from", "e:orion-not-null", 0.7, "11-08 16:45")])

add("p:orion-pg16-bluegreen", "plan_graph", plan("postgres-major-upgrade-bluegreen", "1.0",
    "Upgrade a managed Postgres cluster one major version with under a minute of downtime",
    {"window": "Sunday 02:00-04:00 UTC", "approver": "DBA", "rollback": "switch back within 7 days"},
    {"cluster": "string", "target_version": "string"}, {"downtime_s": "number", "analyze_done": "bool"},
    [("rehearse", "apply_competence", {"skill": "rehearse a major Postgres upgrade on a snapshot restore"}, {}),
     ("approve", "human_approval", {"who": "Sofia Alvarez"}, {}),
     ("create-green", "aws_rds", {"action": "create-blue-green-deployment"}, {"require": "inside maintenance window"}),
     ("switchover", "aws_rds", {"action": "switchover-blue-green-deployment", "timeout_s": 300}, {"require": "green in sync"}),
     ("analyze", "run_sql", {"sql": "ANALYZE VERBOSE"}, {}),
     ("verify", "check_health", {"slo": "p95 < 300ms", "error_rate": "< 0.1%"}, {}),
     ("cleanup", "aws_rds", {"action": "delete old blue", "after_days": 7}, {"require": "no rollback requested"})],
    [("rehearse", "approve", "data"), ("approve", "create-green", "control"), ("create-green", "switchover", "control"),
     ("switchover", "analyze", "control"), ("analyze", "verify", "control"), ("verify", "cleanup", "control")],
    (18720000, 0.0, 2, "11-09 05:50")),
    sens="medium", conf=0.85, scope=O, tags=["plan", "postgres", "upgrade"], at="10-17 10:00",
    sal=0.7, why="drafted after the rehearsal", by=AGENT,
    history=[("reinforce", "11-09 05:55", AGENT, "executed on prod: 41 s downtime")],
    rels=[("derived_from", "e:orion-pg-rehearsal", 0.8), ("derived_from", "e:orion-cutover", 0.9, "11-09 05:55")]
    + mention("orion-db"))

# --- working -------------------------------------------------------------------------------------

add("w:orion-pg16", "working", work("orion-pg16-upgrade", "waiting",
    [("window", "maintenance", "Sunday 02:00-04:00 UTC", True), ("approval", "dba", "Sofia Alvarez", True)],
    ["delete the old blue cluster once Sofia confirms"], ["keep the PG13 snapshot for 30 days or 90?"],
    "ORION-301: prod on 16.4 since Nov 9 (41 s downtime). Old blue kept until Sofia's go."),
    sens="medium", conf=0.9, scope=O, tags=["postgres", "upgrade"], at="10-14 09:46", sal=0.8,
    why="thread opened", dec=decay(curve="custom", half_life=2 * DAY, min_salience=0.0, gain=0.25, points=HOLD_3D_THEN_DROP),
    history=[("revise", "10-16 14:55", AGENT, "rehearsal green"),
             ("revise", "11-09 05:55", AGENT, "cutover done; waiting to delete blue"),
             ("reinforce", "11-16 09:35", AGENT, "Sofia asked to keep the snapshot")],
    rels=[("derived_from", "e:orion-cutover", 0.9, "11-09 05:55")] + mention("orion-db", "sofia"))

add("w:orion-backfill", "working", work("orion-tenant-backfill", "done",
    [("limit", "replica_lag_s", 5, True), ("limit", "batch_rows", 2000, True)],
    [], [],
    "ORION-288: 48.2M invoice rows backfilled over 6 nights; tenant_id NOT NULL since Nov 8."),
    sens="medium", conf=0.9, scope=O, tags=["postgres", "backfill"], at="10-28 14:55", sal=0.8,
    why="thread opened", dec=decay(half_life=36 * HOUR, min_salience=0.0, gain=0.25),
    history=[("revise", "10-29 09:05", AGENT, "state executing with throttling"),
             ("revise", "11-08 16:40", AGENT, "state done")],
    rels=[("derived_from", "e:orion-backfill-lag", 0.8), ("derived_from", "e:orion-not-null", 0.8, "11-08 16:40")])

add("w:orion-alembic-squash", "working", work("orion-alembic-squash", "planning",
    [("rule", "downgrade_required", True, True)],
    ["list revisions older than 2025", "draft a squashed baseline", "ask Sofia whether prod can be stamped"],
    ["do the ops scripts rely on old revision ids?"],
    "Considering squashing 214 alembic revisions into one baseline."),
    sens="low", conf=0.7, scope=O, tags=["alembic", "migrations", "cleanup"], at="11-18 14:00", sal=0.6,
    why="idea from Maya", rels=mention("alembic", "repo-orion"))


# =============================================================================================
# infra-ops: INC-2291 (ingress-nginx CrashLoopBackOff), EKS upgrades, Terraform, AWS key rotation
# =============================================================================================

X = "infra-ops"
INCIDENT_DECAY = lambda: decay(curve="custom", half_life=7 * DAY, min_salience=0.0, gain=0.2, points=INCIDENT_TAIL)

add("s:eks-129", "semantic", sem("k8s-prod-eu1", "kubernetes_version", "1.29",
    ev=[("tool", "kubectl version", "08-04 10:20")]),
    sens="low", conf=0.97, scope=X, tags=["kubernetes", "eks", "version"], at="08-04 10:25",
    sal=0.7, why="read at onboarding",
    history=[("superseded", "10-30 12:05", AGENT, "control plane and nodes upgraded", "s:eks-130")],
    rels=mention("k8s-cluster"))

add("e:eks-130-upgrade", "episodic", epi("eks-130-2026-10-30", "10-30 08:00", [
    (0, "tool_call", "checked for removed APIs", ("kubent", {"argv": ["--target-version", "1.30"]}, "0 deprecated APIs in use")),
    (6, "tool_call", "upgraded the control plane", ("terraform", {"argv": ["apply", "-target=module.eks", "-var", "cluster_version=1.30"], "cwd": "envs/prod-eu1"}, "Apply complete! Resources: 0 added, 1 changed, 0 destroyed. (11m)")),
    (20, "tool_call", "upgraded add-ons", ("aws", {"argv": ["eks", "update-addon", "--addon-name", "vpc-cni", "--addon-version", "v1.18.5-eksbuild.1"]}, "ACTIVE")),
    (35, "tool_call", "rolled the node group", ("terraform", {"argv": ["apply", "-target=module.eks.module.eks_managed_node_group[\"default\"]"]}, "6 nodes replaced, 0 pods lost (PDBs respected)")),
    (240, "tool_call", "verified", ("kubectl", {"argv": ["get", "nodes", "-o", "wide"]}, "6 Ready, v1.30.4-eks"), [3]),
], env(ENV_INFRA, ticket="OPS-2240", cluster="prod-eu1"), "success", ["OPS-2240"]),
    sens="medium", conf=0.96, scope=X, tags=["kubernetes", "eks", "upgrade"], at="10-30 12:00",
    sal=0.7, why="cluster upgrade", rels=mention("k8s-cluster", "terraform"))

add("s:eks-130", "semantic", sem("k8s-prod-eu1", "kubernetes_version", "1.30",
    ev=[("event", I("e:eks-130-upgrade"), "10-30 12:00")]),
    sens="low", conf=0.98, scope=X, tags=["kubernetes", "eks", "version"], at="10-30 12:05",
    sal=0.85, why="upgrade finished", supersedes="s:eks-129",
    history=[("reinforce", "11-03 02:25", AGENT, "checked during INC-2291")],
    rels=[("derived_from", "e:eks-130-upgrade", 0.9)] + mention("k8s-cluster"))

add("s:ingress-194", "semantic", sem("ingress-nginx in prod-eu1", "chart_version",
    {"chart": "4.9.1", "controller": "1.9.4"},
    ev=[("tool", "helm list -n ingress-nginx", "08-04 10:22")]),
    sens="public", conf=0.95, scope=X, tags=["kubernetes", "ingress", "version"], at="08-04 10:30",
    sal=0.6, why="read at onboarding",
    history=[("reinforce", "11-03 02:22", AGENT, "INC-2291 triage"),
             ("superseded", "11-06 16:20", AGENT, "upgraded together with the cert-manager fix", "s:ingress-1113")],
    rels=mention("ingress"))

add("e:inc2291-page", "episodic", epi("inc-2291", "11-03 02:14", [
    (0, "observation", "PagerDuty: 'alpha-gateway 5xx > 20% for 2m' (INC-2291)", None),
    (1, "tool_call", "controller pods", ("kubectl", {"argv": ["-n", "ingress-nginx", "get", "pods"]}, "3/3 ingress-nginx-controller CrashLoopBackOff, restarts 7")),
    (3, "tool_call", "describe", ("kubectl", {"argv": ["-n", "ingress-nginx", "describe", "pod", "-l", "app.kubernetes.io/component=controller"]}, "Liveness probe failed; Back-off restarting failed container")),
    (5, "tool_call", "previous logs", ("kubectl", {"argv": ["-n", "ingress-nginx", "logs", "-l", "app.kubernetes.io/component=controller", "--previous", "--tail=50"]}, "x509: certificate signed by unknown authority (admission webhook)")),
    (6, "agent_turn", "controller cannot verify its own admission webhook; looking for a recent cert change", None),
], env(ENV_INFRA, incident="INC-2291", cluster="prod-eu1"), "failure", []),
    sens="medium", conf=0.97, scope=X, tags=["incident", "kubernetes", "ingress"], at="11-03 02:20",
    sal=0.9, why="incident started", dec=INCIDENT_DECAY(),
    rels=mention("inc-2291", "ingress", "k8s-cluster", "tomasz"))

add("e:inc2291-logs", "episodic", epi("inc-2291", "11-03 02:21", [
    (0, "tool_call", "recent helm changes", ("helm", {"argv": ["history", "cert-manager", "-n", "cert-manager", "--max", "3"]}, "rev 5 upgraded 1.14.5 -> 1.15.3 at 01:58 UTC (Renovate automerge)")),
    (3, "tool_call", "webhook CA", ("kubectl", {"argv": ["get", "validatingwebhookconfiguration", "ingress-nginx-admission", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}"]}, "caBundle still the pre-rotation CA"), []),
    (7, "tool_call", "cainjector logs", ("kubectl", {"argv": ["-n", "cert-manager", "logs", "deploy/cert-manager-cainjector", "--tail=20"]}, "forbidden: cannot patch validatingwebhookconfigurations"), []),
    (10, "agent_turn", "1.15.3 rotated the CA but cainjector lacks RBAC to re-inject it: roll back cert-manager", None),
], env(ENV_INFRA, incident="INC-2291", cluster="prod-eu1"), "success", []),
    sens="medium", conf=0.95, scope=X, tags=["incident", "kubernetes", "cert-manager", "root-cause"], at="11-03 02:33",
    sal=0.9, why="root cause found", dec=INCIDENT_DECAY(),
    rels=[("derived_from", "e:inc2291-page", 0.9)] + mention("inc-2291", "cert-manager"))

add("e:inc2291-mitigate", "episodic", epi("inc-2291", "11-03 02:41", [
    (0, "user_message", "Tomasz (IC): 'Go for the rollback.'", None),
    (1, "tool_call", "rolled back cert-manager", ("helm", {"argv": ["rollback", "cert-manager", "4", "-n", "cert-manager"]}, "Rollback was a success! Happy Helming!")),
    (4, "tool_call", "restarted the controller", ("kubectl", {"argv": ["-n", "ingress-nginx", "rollout", "restart", "deploy/ingress-nginx-controller"]}, "restarted")),
    (9, "tool_call", "watched pods", ("kubectl", {"argv": ["-n", "ingress-nginx", "get", "pods", "-w"]}, "3/3 Running, 0 restarts")),
    (21, "observation", "alpha-gateway 5xx back to 0.02% at 03:02 UTC; page resolved", None),
    (23, "tool_call", "paused Renovate automerge for cert-manager", ("gh", {"argv": ["pr", "create", "--repo", "examplecorp/infra-live", "--title", "chore(renovate): no automerge for cert-manager"]}, "https://github.com/examplecorp/infra-live/pull/1187")),
], env(ENV_INFRA, incident="INC-2291", cluster="prod-eu1"), "success", ["infra-live#1187"]),
    sens="medium", conf=0.97, scope=X, tags=["incident", "kubernetes", "mitigation"], at="11-03 03:04",
    sal=0.95, why="incident mitigated", dec=INCIDENT_DECAY(),
    history=[("reinforce", "11-05 13:30", AGENT, "postmortem timeline"),
             ("reinforce", "11-06 15:05", AGENT, "reference for the upgrade")],
    rels=[("derived_from", "e:inc2291-logs", 0.9)] + mention("inc-2291", "cert-manager", "tomasz"))

add("s:inc2291-root", "semantic", sem("INC-2291", "root_cause",
    "cert-manager 1.15.3 rotated the CA of the ingress-nginx admission webhook and cainjector, lacking RBAC on validatingwebhookconfigurations, never re-injected the caBundle",
    ev=[("event", I("e:inc2291-logs"), "11-03 02:28"), ("human", "postmortem/INC-2291", "11-05 13:00")]),
    sens="medium", conf=0.93, scope=X, tags=["incident", "root-cause", "cert-manager"], at="11-03 03:10",
    sal=0.9, why="from triage, confirmed in the postmortem",
    history=[("revise", "11-05 13:10", AGENT, "postmortem added the RBAC detail"),
             ("reinforce", "11-06 15:00", AGENT, "fix verified on staging")],
    rels=[("derived_from", "e:inc2291-logs", 0.9)] + mention("inc-2291", "cert-manager", "ingress"))

add("s:inc2291-mitigation", "semantic", sem("INC-2291", "mitigation",
    ["helm rollback cert-manager to 1.14.5 (revision 4)",
     "kubectl rollout restart deploy/ingress-nginx-controller",
     "Renovate automerge disabled for cert-manager"],
    ev=[("event", I("e:inc2291-mitigate"), "11-03 03:02")]),
    sens="medium", conf=0.97, scope=X, tags=["incident", "mitigation"], at="11-03 03:12",
    sal=0.85, why="what worked", rels=[("derived_from", "e:inc2291-mitigate", 0.9)] + mention("inc-2291"))

add("s:inc2291-impact", "semantic", sem("INC-2291", "customer_impact",
    {"duration_min": 48, "peak_5xx_pct": 63, "escalations": ["Globex (account FAKE-CUST-4471)", "Initech (account FAKE-CUST-0193)"],
     "sla_credit": "5% of November invoice for FAKE-CUST-4471"},
    ev=[("human", "postmortem/INC-2291#impact", "11-05 13:00")], policy="manual_review"),
    sens="high", conf=0.9, scope=X, tags=["incident", "customers", "sla"], at="11-05 13:20",
    sal=0.7, why="impact section of the postmortem", policy="manual_only",
    rels=mention("inc-2291"))

add("e:inc2291-postmortem", "episodic", epi("inc-2291-pm", "11-05 13:00", [
    (0, "tool_call", "collected the timeline from the incident channel", ("slack", {"channel": "#inc-2291", "export": True}, "142 messages")),
    (20, "tool_call", "drafted the postmortem", ("write_file", {"path": "postmortems/2026-11-03-INC-2291.md"}, "written")),
    (55, "user_message", "Tomasz: 'add the cainjector RBAC detail and the Renovate action item'", None),
    (60, "tool_call", "opened the PR", ("gh", {"argv": ["pr", "create", "--repo", "examplecorp/infra-live", "--title", "docs: INC-2291 postmortem"]}, "https://github.com/examplecorp/infra-live/pull/1191")),
], env(ENV_INFRA, incident="INC-2291"), "success", ["postmortems/2026-11-03-INC-2291.md", "infra-live#1191"]),
    sens="medium", conf=0.95, scope=X, tags=["incident", "postmortem"], at="11-05 14:00",
    sal=0.8, why="postmortem written", policy="never", dec=INCIDENT_DECAY(),
    rels=mention("inc-2291", "tomasz"))

add("e:ingress-upgrade", "episodic", epi("ingress-upgrade-2026-11-06", "11-06 15:00", [
    (0, "tool_call", "added cainjector RBAC", ("edit_file", {"path": "helm/cert-manager/values.yaml", "change": "cainjector.extraArgs + ClusterRole patch for validatingwebhookconfigurations"}, "applied")),
    (10, "tool_call", "staging: cert-manager 1.15.3 and ingress-nginx 4.11.3", ("helmfile", {"argv": ["-e", "staging", "apply"]}, "2 releases upgraded")),
    (30, "tool_call", "verified the webhook CA follows rotation", ("kubectl", {"argv": ["get", "validatingwebhookconfiguration", "ingress-nginx-admission", "-o", "yaml"]}, "caBundle matches the new CA")),
    (45, "tool_call", "prod", ("helmfile", {"argv": ["-e", "prod-eu1", "apply"]}, "2 releases upgraded; controller 3/3 Running")),
    (80, "agent_turn", "INC-2291 action items 1 and 2 closed", None),
], env(ENV_INFRA, ticket="OPS-2296"), "success", ["infra-live#1194"]),
    sens="low", conf=0.95, scope=X, tags=["kubernetes", "ingress", "cert-manager", "upgrade"], at="11-06 16:20",
    sal=0.75, why="fixed forward", rels=[("derived_from", "s:inc2291-root", 0.8)] + mention("ingress", "cert-manager"))

add("s:ingress-1113", "semantic", sem("ingress-nginx in prod-eu1", "chart_version",
    {"chart": "4.11.3", "controller": "1.11.3"},
    ev=[("event", I("e:ingress-upgrade"), "11-06 15:45")]),
    sens="public", conf=0.97, scope=X, tags=["kubernetes", "ingress", "version"], at="11-06 16:20",
    sal=0.8, why="upgraded", supersedes="s:ingress-194",
    rels=[("derived_from", "e:ingress-upgrade", 0.9)] + mention("ingress"))

add("s:ingress-pdb", "semantic", sem("ingress-nginx", "pod_disruption_budget", {"minAvailable": 2},
    ev=[("tool", "kubectl -n ingress-nginx get pdb", "10-30 08:30")]),
    sens="public", conf=0.95, scope=X, tags=["kubernetes", "ingress", "availability"], at="10-30 08:40",
    sal=0.6, why="seen during the node roll", rels=mention("ingress"))

add("s:node-group", "semantic", sem("prod-eu1 default node group", "sizing",
    {"instance_type": "m6i.xlarge", "min": 3, "max": 12, "desired": 6, "capacity_type": "ON_DEMAND"},
    ev=[("observation", "infra-live/envs/prod-eu1/eks.tf", "08-04 10:40")]),
    sens="low", conf=0.9, scope=X, tags=["kubernetes", "eks", "capacity"], at="08-04 10:45",
    sal=0.6, why="read from Terraform",
    history=[("reinforce", "10-30 08:35", AGENT, "node roll of the 1.30 upgrade")],
    rels=mention("k8s-cluster"))

# --- payments OOM: two observations merged into one fact ----------------------------------

add("e:payments-oom", "episodic", epi("payments-oom-2026-10-25", "10-25 10:00", [
    (0, "observation", "payments-api pods OOMKilled 14 times during the monthly export", None),
    (2, "tool_call", "memory usage", ("kubectl", {"argv": ["-n", "payments", "top", "pods"]}, "payments-api-7d9 498Mi/512Mi")),
    (4, "tool_call", "why", ("kubectl", {"argv": ["-n", "payments", "describe", "pod", "payments-api-7d9"]}, "Last State: Terminated, Reason: OOMKilled, Exit Code 137")),
    (10, "tool_call", "raised the limit", ("edit_file", {"path": "helm/payments-api/values-prod.yaml", "change": "limits.memory 512Mi -> 768Mi"}, "applied")),
    (30, "tool_call", "rolled out", ("helmfile", {"argv": ["-e", "prod-eu1", "-l", "name=payments-api", "apply"]}, "3/3 ready; export finished at 612Mi peak")),
], env(ENV_INFRA, ticket="OPS-2251"), "success", ["infra-live#1162"]),
    sens="low", conf=0.95, scope=X, tags=["kubernetes", "oom", "payments"], at="10-25 10:40",
    sal=0.6, why="OOM fix", rels=mention("k8s-cluster"))

add("s:payments-oom-a", "semantic", sem("payments-api", "oomkilled_at", "512Mi during the monthly export",
    ev=[("event", I("e:payments-oom"), "10-25 10:04")]),
    sens="low", conf=0.9, scope=X, tags=["kubernetes", "oom", "payments"], at="10-25 10:45",
    sal=0.6, why="observation",
    history=[("merge", "10-26 09:00", CURATOR, "merged into one capacity fact", "s:payments-mem")],
    rels=[("derived_from", "e:payments-oom", 0.9)])

add("s:payments-oom-b", "semantic", sem("payments-api", "memory_grows_with", "export size (about 110Mi per 100k invoices)",
    ev=[("tool", "datadog: kubernetes.memory.rss payments-api", "10-25 11:00")]),
    sens="low", conf=0.7, scope=X, tags=["kubernetes", "oom", "payments"], at="10-25 11:05",
    sal=0.55, why="correlation from Datadog",
    history=[("merge", "10-26 09:00", CURATOR, "merged into one capacity fact", "s:payments-mem")])

add("s:payments-mem", "semantic", sem("payments-api", "memory_settings",
    {"requests": "512Mi", "limits": "768Mi", "reason": "monthly export peaks near 612Mi and grows ~110Mi per 100k invoices"},
    ev=[("event", I("e:payments-oom"), "10-25 10:30")]),
    sens="low", conf=0.9, scope=X, tags=["kubernetes", "capacity", "payments"], at="10-26 09:00",
    sal=0.75, why="merged from two observations", by=CURATOR, merged_from=["s:payments-oom-a", "s:payments-oom-b"],
    history=[("reinforce", "11-18 11:00", AGENT, "checked before the November export")])

# --- Terraform ----------------------------------------------------------------------------------

add("e:tf-lock", "episodic", epi("tf-lock-2026-10-17", "10-17 11:00", [
    (0, "tool_call", "plan", ("terraform", {"argv": ["plan"], "cwd": "envs/prod-eu1"}, "Error acquiring the state lock: ConditionalCheckFailedException; Lock Info ID 9db1c2e4-51f0-7a3b-88aa-0c4d2e6f1a77, Who runner@gha-7781")),
    (3, "tool_call", "is that apply still running?", ("gh", {"argv": ["run", "view", "7781", "--repo", "examplecorp/infra-live"]}, "cancelled 42 minutes ago (concurrency group)"), []),
    (5, "user_message", "Tomasz: 'confirmed nothing is applying, go ahead'", None),
    (6, "tool_call", "unlocked", ("terraform", {"argv": ["force-unlock", "-force", "9db1c2e4-51f0-7a3b-88aa-0c4d2e6f1a77"]}, "Terraform state has been successfully unlocked!"), [1, 2]),
    (8, "tool_call", "plan again", ("terraform", {"argv": ["plan"]}, "No changes. Your infrastructure matches the configuration.")),
], env(ENV_INFRA, cwd="envs/prod-eu1"), "success", []),
    sens="medium", conf=0.95, scope=X, tags=["terraform", "state-lock"], at="10-17 11:09",
    sal=0.55, why="stuck lock", rels=mention("terraform", "tomasz"))

add("s:tf-force-unlock", "semantic", sem("terraform force-unlock", "precondition",
    "confirm no apply holds the lock (lock Who/Created plus the CI run state) and get a second person's OK",
    ev=[("event", I("e:tf-lock"), "10-17 11:05")]),
    sens="low", conf=0.92, scope="", tags=["tool", "terraform", "safety"], at="10-17 11:15",
    sal=0.75, why="learned with Tomasz", dec=decay(half_life=180 * DAY, min_salience=0.05),
    rels=[("derived_from", "e:tf-lock", 0.9)] + mention("terraform"))

add("s:tf-state-bucket", "semantic", sem("infra-live Terraform state", "backend",
    {"bucket": "examplecorp-tfstate-FAKE-eu1", "dynamodb_table": "tf-locks", "key": "envs/prod-eu1/terraform.tfstate",
     "kms_key": "arn:aws:kms:eu-central-1:000000000000:key/FAKE-kms-0000"},
    ev=[("observation", "infra-live/envs/prod-eu1/backend.tf", "08-04 10:35")], policy="manual_review"),
    sens="high", conf=0.95, scope=X, tags=["terraform", "internal", "state"], at="08-04 10:38",
    sal=0.6, why="backend config", policy="manual_only",
    history=[("reclassify", "08-20 13:30", PRIYA, "sensitivity medium -> high: bucket and KMS names are internal")],
    rels=mention("terraform"))

add("s:tf-aws-provider", "semantic", sem("terraform-aws-modules/eks v20", "compatible_with_aws_provider", ">= 5.31",
    ev=[("observation", "module README (v20.0)", "11-13 17:00")], policy="contest_on_conflict"),
    sens="low", conf=0.55, scope=X, tags=["terraform", "eks", "compatibility"], at="11-13 17:05",
    sal=0.6, why="read from an old README",
    history=[("contest", "11-14 10:20", AGENT, "v20.8.5 init fails with provider 5.31", "e:tf-eks-plan-fail")],
    rels=mention("eks-module", "terraform"))

add("e:tf-eks-plan-fail", "episodic", epi("eks-v20-2026-11-14", "11-14 10:00", [
    (0, "tool_call", "bumped the module", ("edit_file", {"path": "envs/prod-eu1/eks.tf", "change": "version = \"~> 19.21\" -> \"~> 20.8\""}, "applied")),
    (2, "tool_call", "init", ("terraform", {"argv": ["init", "-upgrade"]}, "Error: Unsupported provider version: module.eks requires hashicorp/aws >= 5.40, locked 5.31.0")),
    (5, "tool_call", "where is it pinned?", ("rg", {"argv": ["-n", "hashicorp/aws", "-g", "*.tf"]}, "versions.tf:6 version = \"= 5.31.0\""), []),
    (8, "agent_turn", "bumping the provider touches every env; needs Tomasz's plan review", None),
], env(ENV_INFRA, branch="chore/eks-v20", ticket="OPS-2302"), "failure", []),
    sens="low", conf=0.95, scope=X, tags=["terraform", "eks", "upgrade"], at="11-14 10:10",
    sal=0.7, why="module upgrade blocked",
    rels=[("contradicts", "s:tf-aws-provider", 0.9)] + mention("eks-module", "terraform"))

add("s:eks-v20-provider", "semantic", sem("terraform-aws-modules/eks v20.8", "requires_aws_provider", ">= 5.40",
    ev=[("event", I("e:tf-eks-plan-fail"), "11-14 10:02")]),
    sens="public", conf=0.95, scope=X, tags=["terraform", "eks", "compatibility"], at="11-14 10:20",
    sal=0.8, why="init error message",
    rels=[("derived_from", "e:tf-eks-plan-fail", 0.9), ("contradicts", "s:tf-aws-provider", 0.9)] + mention("eks-module"))

# --- secrets ---------------------------------------------------------------------------------

add("s:aws-key-old", "semantic", sem("terraform-ci IAM user", "access_key",
    {"AWS_ACCESS_KEY_ID": "FAKE-AWS-KEY-AKIAFAKE0000EXAMPLE", "AWS_SECRET_ACCESS_KEY": "FAKE-wJalrXUtnFEMI-K7MDENG-not-real"},
    ev=[("tool", "gh secret list --repo examplecorp/infra-live", "08-20 14:00")], policy="manual_review"),
    sens="hyper", conf=0.9, scope=X, tags=["secret", "aws", "ci"], at="08-20 14:05",
    sal=0.5, why="key the CI uses, recorded for rotation tracking", policy="manual_only",
    dec=decay(half_life=60 * DAY, min_salience=0.0),
    history=[("superseded", "11-16 09:30", AGENT, "rotated; old key deactivated", "s:aws-key-new")])

add("e:aws-key-rotation", "episodic", epi("aws-key-2026-11-16", "11-16 09:00", [
    (0, "observation", "Priya approved SEC-91 (rotate terraform-ci key, 90 days old)", None),
    (2, "tool_call", "created the new key", ("aws", {"argv": ["iam", "create-access-key", "--user-name", "terraform-ci"]}, {"AccessKeyId": "FAKE-AWS-KEY-AKIAFAKE1111ROTATED", "SecretAccessKey": "FAKE-9x8y7z-ROTATED-not-real"})),
    (5, "tool_call", "updated the CI secret", ("gh", {"argv": ["secret", "set", "AWS_ACCESS_KEY_ID", "--repo", "examplecorp/infra-live"]}, "set")),
    (12, "tool_call", "CI plan with the new key", ("gh", {"argv": ["workflow", "run", "plan.yml"]}, "success")),
    (20, "tool_call", "deactivated the old key", ("aws", {"argv": ["iam", "update-access-key", "--access-key-id", "FAKE-AWS-KEY-AKIAFAKE0000EXAMPLE", "--status", "Inactive"]}, "ok")),
], env(ENV_INFRA, ticket="SEC-91"), "success", ["SEC-91"]),
    sens="hyper", conf=0.97, scope=X, tags=["secret-rotation", "aws", "ci"], at="11-16 09:25",
    sal=0.75, why="rotation done", policy="manual_only", rels=mention("priya", "terraform"))

add("s:aws-key-new", "semantic", sem("terraform-ci IAM user", "access_key",
    {"AWS_ACCESS_KEY_ID": "FAKE-AWS-KEY-AKIAFAKE1111ROTATED", "AWS_SECRET_ACCESS_KEY": "FAKE-9x8y7z-ROTATED-not-real"},
    mode="timeboxed", start="11-16 09:05", end=None,
    ev=[("event", I("e:aws-key-rotation"), "11-16 09:02")], policy="manual_review"),
    sens="hyper", conf=0.95, scope=X, tags=["secret", "aws", "ci"], at="11-16 09:30",
    sal=0.6, why="rotated key", supersedes="s:aws-key-old", policy="manual_only",
    dec=decay(half_life=60 * DAY, min_salience=0.0),
    rels=[("derived_from", "e:aws-key-rotation", 0.9)])

add("w:aws-key-rotation", "working", work("sec-91-aws-key", "waiting",
    [("approval", "security", "Priya Raman", True), ("rule", "delete_old_key_after_days", 7, True)],
    ["delete FAKE-AWS-KEY-AKIAFAKE0000EXAMPLE on 2026-11-23 if CloudTrail shows no use"],
    ["does anything outside CI still use the old key?"],
    "SEC-91: new key live in CI, old key inactive; deletion scheduled."),
    sens="hyper", conf=0.9, scope=X, tags=["secret-rotation", "aws"], at="11-16 09:00", sal=0.8,
    why="thread opened", policy="manual_only",
    history=[("revise", "11-16 09:32", AGENT, "state waiting: deletion in 7 days")],
    rels=[("derived_from", "e:aws-key-rotation", 0.9, "11-16 09:32")])

add("s:k8s-sa-token", "semantic", sem("kestrel-readonly service account (prod-eu1)", "token",
    "FAKE-K8S-SA-TOKEN-eyJhbGciOiJSUzI1NiIsImtpZCI6IkZBS0UifQ.not-real",
    ev=[("tool", "kubectl create token kestrel-readonly --duration 720h", "11-01 09:00")], policy="manual_review",
    mode="timeboxed", start="11-01 09:00", conditions={"ttl_hours": 720}),
    sens="hyper", conf=0.9, scope=X, tags=["secret", "kubernetes"], at="11-01 09:02",
    sal=0.55, why="30-day read-only token for triage", policy="manual_only",
    dec=decay(curve="linear", half_life=30 * DAY, min_salience=0.0), rels=mention("k8s-cluster"))

add("s:datadog-key", "semantic", sem("Datadog", "api_key", "FAKE-DD-API-KEY-0000deadbeef0000",
    ev=[("tool", "vault kv get secret/infra/datadog", "08-21 10:00")], policy="manual_review"),
    sens="hyper", conf=0.85, scope=X, tags=["secret", "observability"], at="08-21 10:02",
    sal=0.4, why="used by the lag-watch script", policy="manual_only",
    dec=decay(half_life=90 * DAY, min_salience=0.0))

add("s:slack-webhook", "semantic", sem("#ops-alerts", "incoming_webhook",
    "https://hooks.slack.example/services/TFAKE000/BFAKE000/FAKEwebhook0000",
    ev=[("tool", "vault kv get secret/infra/slack", "11-03 02:50")], policy="manual_review"),
    sens="hyper", conf=0.85, scope=X, tags=["secret", "alerting"], at="11-03 02:52",
    sal=0.4, why="posted the INC-2291 update", policy="manual_only",
    dec=decay(half_life=90 * DAY, min_salience=0.0))

# --- competence -------------------------------------------------------------------------------

add("c:crashloop-triage", "competence", comp("triage a CrashLoopBackOff in Kubernetes", [
    ("alert", {"reason": "CrashLoopBackOff", "namespace": "*"}),
    ("user_message", {"contains_any": ["crashloop", "CrashLoopBackOff", "pods restarting"]}),
], [
    ("list pods and restarts", "kubectl", {"argv": ["get", "pods", "-n", "{ns}"]}, "failing pods identified"),
    ("describe for events and probes", "kubectl", {"argv": ["describe", "pod", "{pod}"]}, "last state and reason known"),
    ("logs of the previous container", "kubectl", {"argv": ["logs", "{pod}", "--previous"]}, "error line found"),
    ("correlate with recent changes", "helm", {"argv": ["history", "{release}"]}, "change within the last 2 h found or ruled out"),
    ("roll back the suspect change", "helm", {"argv": ["rollback", "{release}", "{rev}"]}, "pods Running, 0 restarts for 10 min"),
], ["kubectl", "helm"],
    ["crash caused by a dependency outside the cluster", "rollback blocked by CRD changes"],
    ["scale the deployment to the last good ReplicaSet", "page the service owner"],
    (13, 2, 1500000, "11-14 15:20"), "2.1"),
    sens="low", conf=0.9, scope=X, tags=["skill", "kubernetes", "incident"], at="08-22 10:00",
    sal=0.75, why="consolidated from earlier CrashLoop episodes", by=CONSOL,
    history=[("reinforce", "10-25 10:10", AGENT, "payments OOM loop"),
             ("revise", "11-03 04:00", CONSOL, "added 'correlate with recent changes' after INC-2291"),
             ("reinforce", "11-03 04:01", AGENT, "INC-2291 mitigated in 27 minutes"),
             ("reinforce", "11-14 15:22", AGENT, "orion-worker crash-looped on a missing ConfigMap key; found with logs --previous")],
    rels=[("derived_from", "e:inc2291-mitigate", 0.8, "11-03 04:00"), ("derived_from", "e:inc2291-logs", 0.8, "11-03 04:00")]
    + mention("k8s-cluster"))

add("c:restart-kubelet", "competence", comp("clear CrashLoopBackOff by restarting kubelet", [
    ("alert", {"reason": "CrashLoopBackOff"}),
], [
    ("cordon the node", "kubectl", {"argv": ["cordon", "{node}"]}, "node unschedulable"),
    ("restart kubelet over SSM", "aws", {"argv": ["ssm", "send-command", "systemctl restart kubelet"]}, "kubelet active"),
    ("uncordon", "kubectl", {"argv": ["uncordon", "{node}"]}, "pods rescheduled"),
], ["kubectl", "aws"], ["does not address the container's own failure"], [],
    (1, 3, 900000, "08-18 16:00"), "0.1"),
    sens="low", conf=0.3, scope=X, tags=["skill", "kubernetes", "deprecated"], at="08-18 16:30",
    sal=0.4, why="guessed during a noisy alert", by=AGENT,
    history=[("penalize", "08-22 09:50", CURATOR, "failed 3 of 4 times", 0.2),
             ("retract", "11-04 09:00", CURATOR, "wrong approach; superseded in practice by the triage recipe")],
    rels=[("contradicts", "c:crashloop-triage", 0.7, "11-04 09:00")])

add("c:tf-unlock", "competence", comp("recover a stuck Terraform state lock", [
    ("tool_error", {"tool": "terraform", "contains": "Error acquiring the state lock"}),
], [
    ("read Lock Info (ID, Who, Created)", "terraform", {"argv": ["plan"]}, "lock id captured"),
    ("check the run that holds it", "gh", {"argv": ["run", "view", "{run}"]}, "run finished or cancelled"),
    ("get a second person's OK", "slack", {"channel": "#infra"}, "ack received"),
    ("force-unlock", "terraform", {"argv": ["force-unlock", "-force", "{lock_id}"]}, "unlocked"),
    ("plan again", "terraform", {"argv": ["plan"]}, "no unexpected changes"),
], ["terraform", "gh"], ["unlocking while an apply is running corrupts state"], ["wait for the DynamoDB item TTL"],
    (5, 0, 600000, "11-12 17:40"), "1.0"),
    sens="medium", conf=0.88, scope=X, tags=["skill", "terraform"], at="10-17 11:30",
    sal=0.65, why="from the Oct 17 lock", by=CONSOL,
    history=[("reinforce", "11-12 17:42", AGENT, "lock left by a cancelled CI plan; released after the run was confirmed dead")],
    rels=[("derived_from", "e:tf-lock", 0.9)] + mention("terraform"))

add("c:docker-cache", "competence", comp("speed up Docker builds with layer ordering and cache mounts", [
    ("ci_step_slow", {"step_contains": "docker build", "duration_s_over": 180}),
], [
    ("show cache misses", "docker", {"argv": ["buildx", "build", "--progress=plain"]}, "first invalidated step found"),
    ("copy dependency manifests first", "edit_file", {"path": "Dockerfile"}, "dependency layer cached"),
    ("add cache mounts", "edit_file", {"path": "Dockerfile", "syntax": "docker/dockerfile:1.4"}, "RUN --mount=type=cache present"),
    ("measure", "docker", {"argv": ["buildx", "build"]}, "build time reduced"),
], ["docker"], ["cache not shared between CI runners"], ["use registry cache (--cache-to type=registry)"],
    (7, 1, 1200000, "11-18 14:30"), "1.1"),
    sens="public", conf=0.9, scope=X, tags=["skill", "docker", "ci", "performance"], at="09-08 14:00",
    sal=0.6, why="from the alpha e2e image work", by=CONSOL,
    history=[("reinforce", "10-25 11:00", AGENT, "payments-api image 5m -> 70s"),
             ("reinforce", "11-18 14:32", AGENT, "orion-worker image 7m -> 2m with a uv cache mount")],
    rels=[("derived_from", "e:docker-cache", 0.9)] + mention("docker"))

add("c:rotate-aws-key", "competence", comp("rotate an IAM access key used by CI", [
    ("schedule", {"key_age_days_over": 90}),
    ("security_request", {"from": "Priya Raman"}),
], [
    ("create the second key", "aws", {"argv": ["iam", "create-access-key", "--user-name", "{user}"]}, "2 keys active"),
    ("update the CI secret", "gh", {"argv": ["secret", "set", "AWS_ACCESS_KEY_ID"]}, "secret updated"),
    ("run a plan with the new key", "gh", {"argv": ["workflow", "run", "plan.yml"]}, "green"),
    ("deactivate the old key (e.g. FAKE-AWS-KEY-AKIAFAKE0000EXAMPLE)", "aws", {"argv": ["iam", "update-access-key", "--status", "Inactive"]}, "inactive"),
    ("delete after 7 quiet days", "aws", {"argv": ["iam", "delete-access-key"]}, "CloudTrail shows no use"),
], ["aws", "gh"], ["a forgotten consumer breaks when the old key goes inactive"], ["re-activate the old key for 24 h"],
    (3, 0, 1800000, "11-16 09:25"), "1.0"),
    sens="hyper", conf=0.85, scope=X, tags=["skill", "secret-rotation", "aws"], at="08-20 15:00",
    sal=0.6, why="documented with Priya", by=AGENT, policy="manual_only",
    history=[("reinforce", "11-16 09:26", AGENT, "SEC-91 went cleanly")],
    rels=[("derived_from", "e:aws-key-rotation", 0.8, "11-16 09:26")])

# --- plans -------------------------------------------------------------------------------------

add("p:crashloop-incident", "plan_graph", plan("k8s-crashloop-incident-response", "3.0",
    "Restore service when pods crash-loop in production, then learn from it",
    {"ic_required": True, "status_updates_every_min": 15},
    {"alert": "object", "namespace": "string"}, {"mitigated_at": "datetime", "postmortem_url": "string"},
    [("ack", "acknowledge_page", {"tool": "pagerduty"}, {}),
     ("triage", "apply_competence", {"skill": "triage a CrashLoopBackOff in Kubernetes"}, {"timeout_min": 20}),
     ("correlate", "list_recent_changes", {"sources": ["helm history", "renovate PRs", "argo events"]}, {}),
     ("mitigate", "rollback", {"tool": "helm"}, {"approval": "incident commander"}),
     ("verify", "check_slo", {"metric": "5xx rate", "below_pct": 0.5, "for_min": 10}, {}),
     ("communicate", "post_update", {"channel": "#ops-alerts"}, {}),
     ("postmortem", "write_doc", {"template": "postmortems/TEMPLATE.md", "due_days": 3}, {"require": "mitigated"})],
    [("ack", "triage", "control"), ("triage", "correlate", "data"), ("correlate", "mitigate", "data"),
     ("mitigate", "verify", "control"), ("verify", "communicate", "control"), ("mitigate", "communicate", "data"),
     ("verify", "postmortem", "control")],
    (2880000, 0.1, 10, "11-03 03:02")),
    sens="low", conf=0.9, scope=X, tags=["plan", "incident", "kubernetes", "runbook"], at="08-22 11:00",
    sal=0.85, why="team runbook captured as a plan", by=CONSOL, pinned=True, policy="never",
    history=[("pin", "08-22 11:05", TOMASZ, "runbook, keep it"),
             ("revise", "11-05 14:10", AGENT, "v3: correlate node added after INC-2291")],
    rels=[("derived_from", "e:inc2291-mitigate", 0.8, "11-05 14:10"), ("derived_from", "e:inc2291-postmortem", 0.6, "11-05 14:10"),
          ("mentions_entity", "ent:inc-2291", 0.7, "11-05 14:10")])

add("p:eks-upgrade", "plan_graph", plan("eks-minor-upgrade", "1.2",
    "Upgrade an EKS cluster by one minor version without dropping pods",
    {"one_minor_at_a_time": True, "staging_first": True},
    {"cluster": "string", "target": "string"}, {"nodes_ready": "int"},
    [("deprecations", "scan_apis", {"tool": "kubent"}, {"require": "0 removed APIs in use"}),
     ("staging", "terraform_apply", {"env": "staging"}, {}),
     ("control-plane", "terraform_apply", {"target": "module.eks"}, {"require": "staging healthy 48h"}),
     ("addons", "update_addons", {"addons": ["vpc-cni", "coredns", "kube-proxy"]}, {}),
     ("nodes", "roll_node_group", {"max_unavailable": 1}, {"require": "PDBs present for critical services"}),
     ("verify", "check_nodes", {"expect": "all Ready on the new version"}, {})],
    [("deprecations", "staging", "control"), ("staging", "control-plane", "control"),
     ("control-plane", "addons", "control"), ("addons", "nodes", "control"), ("nodes", "verify", "control")],
    (14400000, 0.0, 3, "11-11 13:00")),
    sens="medium", conf=0.85, scope=X, tags=["plan", "kubernetes", "eks", "upgrade"], at="10-28 09:00",
    sal=0.65, why="written before the 1.30 upgrade", by=AGENT,
    history=[("reinforce", "10-30 12:10", AGENT, "1.30 upgrade followed it"),
             ("reinforce", "11-11 13:05", AGENT, "staging 1.30 -> 1.31 followed it")],
    rels=[("derived_from", "e:eks-130-upgrade", 0.8, "10-30 12:10")] + mention("k8s-cluster"))

add("p:tf-apply-review", "plan_graph", plan("terraform-plan-review-apply", "1.4",
    "Apply Terraform changes with a reviewed plan",
    {"apply_from": "CI only", "reviewers": 1},
    {"env": "string", "pr": "int"}, {"applied": "bool"},
    [("plan", "terraform_plan", {"out": "tfplan"}, {}),
     ("render", "terraform_show", {"format": "json"}, {}),
     ("review", "human_review", {"focus": ["destroy", "replace", "iam"]}, {"require": "no unexpected destroys"}),
     ("drift", "compare_state", {"refresh_only": True}, {}),
     ("apply", "terraform_apply", {"plan": "tfplan"}, {"require": "review approved"}),
     ("verify", "terraform_plan", {"expect": "No changes"}, {})],
    [("plan", "render", "data"), ("render", "review", "data"), ("plan", "drift", "control"),
     ("review", "apply", "control"), ("drift", "apply", "control"), ("apply", "verify", "control")],
    (1200000, 0.05, 40, "11-14 10:05")),
    sens="low", conf=0.9, scope=X, tags=["plan", "terraform"], at="08-25 10:00",
    sal=0.7, why="team workflow", by=CONSOL,
    history=[("reinforce", "10-17 11:20", AGENT, "after the lock recovery"),
             ("reinforce", "11-14 10:06", AGENT, "eks v20 attempt")],
    rels=mention("terraform", "repo-infra"))

add("p:cert-manager-upgrade", "plan_graph", plan("cert-manager-upgrade", "1.0",
    "Upgrade cert-manager without breaking webhooks that trust its CA",
    {"automerge": False, "staging_first": True},
    {"from_version": "string", "to_version": "string"}, {"webhooks_ok": "bool"},
    [("rbac", "check_rbac", {"subject": "cert-manager-cainjector", "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]}, {}),
     ("staging", "helmfile_apply", {"env": "staging"}, {}),
     ("ca-check", "compare_ca_bundles", {"webhooks": ["ingress-nginx-admission"]}, {"require": "caBundle matches issuer CA"}),
     ("prod", "helmfile_apply", {"env": "prod-eu1"}, {"require": "staging healthy 24h"}),
     ("verify", "check_pods", {"namespaces": ["ingress-nginx", "cert-manager"]}, {})],
    [("rbac", "staging", "control"), ("staging", "ca-check", "control"), ("ca-check", "prod", "control"),
     ("prod", "verify", "control")],
    (4800000, 0.0, 1, "11-06 16:20")),
    sens="low", conf=0.8, scope=X, tags=["plan", "kubernetes", "cert-manager"], at="11-05 15:00",
    sal=0.7, why="INC-2291 action item", by=AGENT,
    history=[("reinforce", "11-06 16:25", AGENT, "executed for 1.15.3")],
    rels=[("derived_from", "s:inc2291-root", 0.8), ("derived_from", "e:ingress-upgrade", 0.8, "11-06 16:25")]
    + mention("cert-manager"))

# --- working -------------------------------------------------------------------------------------

add("w:inc2291", "working", work("inc-2291", "done",
    [("role", "incident_commander", "Tomasz Nowak", True), ("comms", "update_every_min", 15, True)],
    [], [],
    "INC-2291 resolved 03:02 UTC Nov 3; postmortem merged; action items closed Nov 6."),
    sens="medium", conf=0.95, scope=X, tags=["incident"], at="11-03 02:15", sal=0.9,
    why="incident thread", dec=decay(half_life=2 * DAY, min_salience=0.0, gain=0.25),
    history=[("revise", "11-03 03:05", AGENT, "mitigated"),
             ("revise", "11-05 14:05", AGENT, "postmortem merged"),
             ("revise", "11-06 16:25", AGENT, "state done")],
    rels=[("derived_from", "e:inc2291-mitigate", 0.9, "11-03 03:05")] + mention("inc-2291", "tomasz"))

add("w:eks-v20", "working", work("eks-module-v20", "blocked",
    [("pin", "hashicorp/aws", "= 5.31.0", True), ("review", "plan_reviewer", "Tomasz Nowak", True)],
    ["bump hashicorp/aws to 5.75 in all envs", "plan staging and attach the JSON plan"],
    ["does the v20 access-entries migration need a manual step?"],
    "OPS-2302: eks module v20.8 needs aws provider >= 5.40; provider bump needs review."),
    sens="low", conf=0.85, scope=X, tags=["terraform", "eks", "upgrade"], at="11-14 10:12", sal=0.8,
    why="thread opened", history=[("revise", "11-18 11:30", AGENT, "asked Tomasz for a review slot")],
    rels=[("derived_from", "e:tf-eks-plan-fail", 0.9)] + mention("eks-module", "tomasz"))

add("w:payments-oom", "working", work("payments-oom", "done",
    [("limit", "memory", "768Mi", True)], [], [],
    "OPS-2251: payments-api limit 768Mi; November export to be watched."),
    sens="low", conf=0.9, scope=X, tags=["kubernetes", "oom"], at="10-25 10:02", sal=0.7,
    why="thread opened", dec=decay(curve="linear", half_life=1 * DAY, min_salience=0.0, gain=0.25),
    history=[("revise", "10-25 10:42", AGENT, "state done")],
    rels=[("derived_from", "e:payments-oom", 0.9, "10-25 10:42")])

add("w:alert-noise", "working", work("ingress-alert-noise", "waiting",
    [("slo", "ingress_5xx_pct", 0.5, True)],
    ["compare 5xx alert with 2m vs 5m windows over October", "propose the change to Tomasz"],
    ["should 499s count as errors?"],
    "Ingress 5xx alert fired 11 times in October without impact; tuning the window."),
    sens="low", conf=0.75, scope=X, tags=["alerting", "observability"], at="11-10 10:00", sal=0.7,
    why="noise reduction task", history=[("revise", "11-17 11:00", AGENT, "data pulled; waiting for Tomasz")],
    rels=mention("ingress", "tomasz"))


# =============================================================================================
# Unscoped work: secret scanning, dependency updates, toolchain bumps, releases
# =============================================================================================

add("e:secret-scan", "episodic", epi("secret-scan-2026-11-01", "11-01 10:00", [
    (0, "tool_call", "scanned the alpha repo history", ("gitleaks", {"argv": ["detect", "--source", ".", "--log-opts", "--all"]}, "1 leak: openai-api-key in debug/ci-dump-88407.txt on branch exp/ephemeral-ports")),
    (2, "tool_call", "showed the match", ("git", {"argv": ["show", "3f9e1aa:debug/ci-dump-88407.txt"]}, "OPENAI_API_KEY=sk-FAKE-test-0000000000000000000000alpha")),
    (5, "tool_call", "reported it", ("gh", {"argv": ["issue", "create", "--repo", "examplecorp/security", "--title", "Leaked test key in alpha-gateway branch"]}, "examplecorp/security#77")),
    (8, "agent_turn", "branch deleted; key revocation requested from Priya", None),
], env(ENV_ALPHA, tool="gitleaks 8.21.2"), "success", ["examplecorp/security#77"]),
    sens="high", conf=0.95, scope="", tags=["security", "secret-scanning"], at="11-01 10:10",
    sal=0.8, why="leak found by the weekly scan", policy="manual_only",
    rels=[("supports", "s:alpha-llm-key", 0.5)] + mention("priya", "repo-alpha"))

add("c:scrub-secret", "competence", comp("purge a leaked secret from git history", [
    ("scanner_finding", {"tool": "gitleaks", "severity": ">= high"}),
], [
    ("revoke first", "human", {"owner": "Priya Raman"}, "key revoked before any rewrite"),
    ("list affected refs", "git", {"argv": ["log", "--all", "-S", "{secret}"]}, "refs listed"),
    ("rewrite", "git-filter-repo", {"argv": ["--replace-text", "replacements.txt"], "example_line": "sk-FAKE-test-0000000000000000000000alpha==>REDACTED"}, "no match in git log -S"),
    ("ask GitHub support to purge cached views", "gh", {"ticket": True}, "ticket open"),
], ["git", "git-filter-repo", "gitleaks"],
    ["rewriting shared branches breaks everyone's clones (and the no-force-push rule)"],
    ["delete the branch instead when the secret never reached main"],
    (2, 0, 3600000, "11-01 10:10"), "1.0"),
    sens="high", conf=0.8, scope="", tags=["skill", "security", "git"], at="09-10 10:00",
    sal=0.6, why="written with Priya", by=AGENT,
    history=[("reinforce", "11-01 10:12", AGENT, "branch deletion was enough this time")],
    rels=[("derived_from", "e:secret-scan", 0.6, "11-01 10:12")] + mention("priya"))

add("c:leaked-cred", "competence", comp("respond to a credential printed in CI logs", [
    ("log_scan", {"pattern": "(sk-|AKIA|ghp_)", "source": "ci logs"}),
], [
    ("delete the run logs", "gh", {"argv": ["run", "delete-logs", "{run}"]}, "logs gone"),
    ("revoke and rotate", "human", {"owner": "secret owner"}, "old credential inactive"),
    ("check usage of the old value (e.g. FAKE-AWS-KEY-AKIAFAKE0000EXAMPLE)", "aws", {"argv": ["cloudtrail", "lookup-events"]}, "no foreign use"),
    ("add masking", "edit_file", {"path": ".github/workflows/*.yml", "add": "::add-mask::"}, "value masked in a test run"),
], ["gh", "aws"], ["log copies already downloaded by a third party"], ["treat as compromised and rotate everything in the same vault path"],
    (1, 0, 2700000, "10-02 16:30"), "1.0"),
    sens="hyper", conf=0.7, scope="", tags=["skill", "security", "ci"], at="10-02 16:40",
    sal=0.55, why="from the run 88407 debug dump", by=AGENT, policy="manual_only",
    rels=mention("gh-actions"))

add("p:release-go", "plan_graph", plan("release-go-service", "1.3",
    "Cut a tagged release of a Go service",
    {"semver": True, "changelog": "conventional commits"},
    {"repo": "string", "version": "string"}, {"release_url": "string"},
    [("test", "run_tests", {"cmd": "go test -race ./..."}, {"require": "exit_code == 0"}),
     ("lint", "run_tests", {"cmd": "golangci-lint run"}, {}),
     ("changelog", "generate_changelog", {"from": "last tag"}, {}),
     ("tag", "git_tag", {"signed": True}, {"require": "on main, clean tree"}),
     ("build", "goreleaser", {"args": ["release", "--clean"]}, {}),
     ("announce", "post_update", {"channel": "#releases"}, {})],
    [("test", "tag", "control"), ("lint", "tag", "control"), ("changelog", "tag", "data"),
     ("tag", "build", "control"), ("build", "announce", "data")],
    (900000, 0.08, 12, "11-13 15:40")),
    sens="public", conf=0.9, scope="", tags=["plan", "release", "go"], at="08-28 10:00",
    sal=0.65, why="extracted from release sessions", by=CONSOL,
    history=[("reinforce", "11-13 15:45", AGENT, "alpha-gateway v2.14.0 after the toolchain bump")],
    rels=mention("repo-alpha"))

add("e:go-toolchain", "episodic", epi("toolchain-2026-11-13", "11-13 14:30", [
    (0, "user_message", "Maya: 'bump Go to 1.23.3 everywhere, there is a net/http fix we want.'", None),
    (2, "tool_call", "found pinned versions", ("rg", {"argv": ["-n", "^go 1\\.|go-version:", "-g", "go.mod", "-g", "*.yml"], "path": "~/src"}, "alpha-gateway go.mod 1.23.1; ci-actions setup-go-cache 1.23.1")),
    (6, "tool_call", "bumped alpha-gateway", ("go", {"argv": ["mod", "edit", "-go=1.23.3", "-toolchain=go1.23.3"]}, "ok")),
    (8, "tool_call", "tests", ("go", {"argv": ["test", "-race", "./..."]}, "ok")),
    (15, "tool_call", "bumped ci-actions", ("edit_file", {"path": "setup-go-cache/action.yml", "change": "go-version 1.23.1 -> 1.23.3"}, "applied"), [1]),
    (30, "tool_call", "opened 2 PRs", ("gh", {"argv": ["pr", "create", "--title", "chore(go): toolchain go1.23.3"]}, "alpha-gateway#439, ci-actions#58"), [3, 4]),
], env(ENV_LAPTOP, ticket="none"), "success", ["alpha-gateway#439", "ci-actions#58"]),
    sens="low", conf=0.95, scope="", tags=["go", "toolchain", "dependencies"], at="11-13 15:00",
    sal=0.6, why="toolchain bump", rels=mention("repo-alpha", "repo-ci-actions", "maya"))

add("w:dependabot", "working", work("dependabot-weekly", "executing",
    [("rule", "merge_only_green", True, True), ("rule", "major_bumps_need_human", True, True)],
    ["merge the 6 green patch bumps", "comment on orion#270 (sqlalchemy 2.0 -> 2.1 minor)", "leave the 2 major bumps for Maya"],
    ["is pydantic 2.10 safe for orion's custom validators?"],
    "Weekly dependency triage across alpha-gateway, orion-billing and infra-live: 9 open PRs."),
    sens="public", conf=0.85, scope="", tags=["dependencies", "maintenance"], at="11-18 10:05", sal=0.85,
    why="weekly triage", rels=[("derived_from", "e:dependabot-11-18", 0.8)] + mention("repo-alpha", "repo-orion", "repo-infra"))

add("w:weekly-summary", "working", work("weekly-summary-2026-w47", "waiting",
    [("format", "style", "terse bullets, blockers first", True), ("deadline", "send_by", "Friday 16:00 Europe/Berlin", True)],
    ["send the summary on Friday"],
    ["include the JWT rotation blocker or escalate separately?"],
    "Draft: ALPHA-265 rate limiter in progress; ALPHA-261 waiting on reruns; ORION-301 done; OPS-2302 blocked on provider bump; SEC-88 blocked on approval."),
    sens="low", conf=0.8, scope="", tags=["communication", "summary"], at="11-19 17:00", sal=0.7,
    why="weekly summary draft", dec=decay(curve="custom", half_life=2 * DAY, min_salience=0.0, gain=0.25, points=HOLD_3D_THEN_DROP),
    rels=[("derived_from", "s:status-updates", 0.6)] + mention("maya"))

add("w:go-toolchain", "working", work("toolchain-go1.23.3", "done",
    [("version", "go", "1.23.3", True)], [], [],
    "Go 1.23.3 everywhere: alpha-gateway#439 and ci-actions#58 merged; alpha v2.14.0 released."),
    sens="low", conf=0.9, scope="", tags=["go", "toolchain"], at="11-13 14:31", sal=0.7,
    why="thread opened", history=[("revise", "11-13 15:45", AGENT, "state done")],
    rels=[("derived_from", "e:go-toolchain", 0.9, "11-13 15:45")])


# =============================================================================================
# Routine episodes: many small, similar traces (as a real store accumulates them)
# =============================================================================================

def sha7():
    return "%07x" % RNG.getrandbits(28)


# alpha CI on main: (day, what happened)
CI_RUNS = [("09-30", "flake"), ("10-01", "green"), ("10-06", "flake"), ("10-08", "lint"),
           ("10-22", "green"), ("11-10", "green"), ("11-16", "green")]
run_no = 88190
for day, what in CI_RUNS:
    run_no += RNG.randint(40, 160)
    start = T(day + " %02d:%02d" % (RNG.randint(8, 16), RNG.randint(0, 59)))
    commit = sha7()
    unit_s, e2e_s = RNG.randint(70, 140), RNG.randint(300, 520)
    steps = [(0, "observation", f"CI run {run_no} on main at {commit}", None),
             (1, "tool_call", "job summary", ("gh", {"argv": ["run", "view", str(run_no)]},
              {"lint": "pass" if what != "lint" else "fail", "unit": f"pass ({unit_s}s)",
               "e2e": ("fail" if what == "flake" else "pass") + f" ({e2e_s}s)"}))]
    if what == "flake":
        steps += [(3, "tool_call", "failing test", ("gh", {"argv": ["run", "view", str(run_no), "--log-failed"]},
                   "test_refresh_rotates_token: assert new_token != old_token")),
                  (5, "tool_call", "rerun", ("gh", {"argv": ["run", "rerun", str(run_no), "--failed"]}, "passed on attempt 2")),
                  (15, "agent_turn", "known flake ALPHA-230; counted, no action", None)]
        outcome, rels = "partial", [("supports", "s:alpha-flake-rate", 0.5)] + mention("flaky-test")
    elif what == "lint":
        steps += [(3, "tool_call", "lint output", ("gh", {"argv": ["run", "view", str(run_no), "--log-failed"]},
                   "internal/ratelimit/limiter.go:41: File is not gofumpt-ed (gofumpt)")),
                  (6, "tool_call", "fixed formatting", ("gofumpt", {"argv": ["-w", "internal/ratelimit/limiter.go"]}, "formatted")),
                  (9, "agent_turn", "pushed a style fix", None)]
        outcome, rels = "failure", [("supports", "s:go-format", 0.4)]
    else:
        steps += [(2, "agent_turn", "green; nothing to do", None)]
        outcome, rels = "success", []
    p = epi(f"ci-alpha-{run_no}", start, steps, env(ENV_CI, run=run_no, commit=commit, branch="main"), outcome)
    add(f"e:ci-run-{run_no}", "episodic", p, sens="public", conf=0.98, scope=A,
        tags=["ci", "routine"] + (["flaky-test"] if what == "flake" else []),
        at=end_of(p), sal=round(0.25 + 0.25 * (outcome != "success"), 2), why="CI run observed",
        dec=decay(curve="linear", half_life=2 * DAY, min_salience=0.0, max_age=30 * DAY, gain=0.1),
        rels=rels + mention("ci-workflow", w=0.4))

# orion backfill nights: throttled 2k batches (after the Oct 28 stop)
BACKFILL_NIGHTS = ["10-30", "10-31", "11-01", "11-03", "11-04", "11-06"]
done_rows, last_id = 610000, 4_120_551
TOTAL_ROWS = 48213377
for n, day in enumerate(BACKFILL_NIGHTS, start=1):
    last = n == len(BACKFILL_NIGHTS)
    rows = TOTAL_ROWS - done_rows if last else RNG.randint(7_400_000, 8_600_000)
    lag = round(RNG.uniform(1.5, 4.8), 1)
    paused = day == "11-03"
    if paused:
        lag = 6.1
    last_id += int(rows * 6.3)
    done_rows += rows
    start = T(day + " 02:00")
    steps = [(0, "tool_call", f"backfill night {n}", ("uv", {"argv": ["run", "scripts/backfill_tenant_id.py", "--batch", "2000",
                                                         "--sleep-ms", "250", "--max-lag", "5", "--resume"]}, "started"))]
    if paused:
        steps += [(95, "observation", "replica lag 6.1s on reader-1 (nightly report export running)", None),
                  (96, "tool_call", "auto-paused", ("uv", {"argv": ["run", "scripts/backfill_tenant_id.py", "--status"]}, "paused 14 min, resumed at lag 1.2s"), [1])]
    steps += [(205, "tool_call", "night summary", ("uv", {"argv": ["run", "scripts/backfill_tenant_id.py", "--status"]},
               {"rows": rows, "cumulative": done_rows, "last_id": last_id, "max_lag_s": lag}), [1]),
              (206, "agent_turn", ("backfill complete: 0 NULL tenant_id rows remain" if last else f"{done_rows / TOTAL_ROWS:.0%} done"), None)]
    p = epi(f"orion-backfill-night-{n}", start, steps, env(ENV_ORION, ticket="ORION-288", night=n), "partial" if paused else "success")
    add(f"e:backfill-night-{n}", "episodic", p, sens="medium", conf=0.97, scope=O,
        tags=["postgres", "backfill", "routine"], at=end_of(p), sal=0.45 if not last else 0.7,
        why="nightly backfill progress",
        dec=decay(half_life=2 * DAY, min_salience=0.0, max_age=60 * DAY, gain=0.1),
        rels=([("supports", "s:orion-batch-size", 0.6)] if start > T("11-02 10:05") else []) + mention("invoices", w=0.5))

# infra weekly health checks (Mondays)
HEALTH = [("09-07", None), ("09-21", "cronjob report-exporter-28791440 Error (known, OPS-2188)"),
          ("10-05", None), ("10-19", "payments-api-7d9f restarts=3 (OOMKilled)"),
          ("11-09", None), ("11-16", None)]
for day, problem in HEALTH:
    start = T(day + " 08:%02d" % RNG.randint(30, 59))
    cpu = RNG.randint(31, 64)
    steps = [(0, "tool_call", "nodes", ("kubectl", {"argv": ["get", "nodes"]}, "6 Ready")),
             (1, "tool_call", "node usage", ("kubectl", {"argv": ["top", "nodes"]}, f"cpu {cpu}% avg, memory {RNG.randint(48, 71)}% avg"), []),
             (2, "tool_call", "unhealthy pods", ("kubectl", {"argv": ["get", "pods", "-A", "--field-selector=status.phase!=Running,status.phase!=Succeeded"]},
              problem or "No resources found"), []),
             (3, "tool_call", "warning events", ("kubectl", {"argv": ["get", "events", "-A", "--field-selector", "type=Warning", "-o", "name"]},
              f"{RNG.randint(0, 40)} warnings in 1h"), [])]
    if problem:
        steps.append((6, "agent_turn", f"flagged: {problem.split(' ')[0]}", None))
    p = epi(f"k8s-health-{day}", start, steps, env(ENV_INFRA, cluster="prod-eu1", kind="weekly health check"),
            "partial" if problem else "success")
    add(f"e:k8s-health-{day}", "episodic", p, sens="low", conf=0.97, scope=X,
        tags=["kubernetes", "health-check", "routine"], at=end_of(p),
        sal=0.5 if problem else 0.3, why="weekly health check",
        dec=decay(half_life=1 * DAY, min_salience=0.0, max_age=60 * DAY, gain=0.1),
        rels=mention("k8s-cluster", w=0.5))

# dependency triage sessions (unscoped)
for day, opened, merged in [("10-21", 11, 8), ("11-04", 6, 6)]:
    start = T(day + " 10:%02d" % RNG.randint(0, 20))
    steps = [(0, "tool_call", "open dependency PRs", ("gh", {"argv": ["search", "prs", "--owner", "examplecorp", "--author", "app/dependabot", "--state", "open"]}, f"{opened} open")),
             (4, "tool_call", "merged the green patch bumps", ("gh", {"argv": ["pr", "merge", "--squash", "--auto"]}, f"{merged} merged")),
             (9, "agent_turn", f"{opened - merged} left for review" if opened > merged else "inbox empty", None)]
    p = epi(f"dependabot-{day}", start, steps, env(ENV_LAPTOP, kind="dependency triage"), "success")
    add(f"e:dependabot-{day}", "episodic", p, sens="public", conf=0.95, scope="",
        tags=["dependencies", "routine"], at=end_of(p), sal=0.35, why="dependency triage",
        rels=mention("repo-alpha", "repo-orion", w=0.3))

add("e:dependabot-11-18", "episodic", epi("dependabot-11-18", "11-18 10:00", [
    (0, "tool_call", "open dependency PRs", ("gh", {"argv": ["search", "prs", "--owner", "examplecorp", "--author", "app/dependabot", "--state", "open"]}, "9 open")),
    (3, "tool_call", "checked which are green", ("gh", {"argv": ["pr", "checks"]}, "6 green, 1 failing (orion#270), 2 major bumps")),
    (5, "agent_turn", "started triage; see working thread dependabot-weekly", None),
], env(ENV_LAPTOP, kind="dependency triage"), "partial"),
    sens="public", conf=0.95, scope="", tags=["dependencies", "routine"], at="11-18 10:05",
    sal=0.6, why="dependency triage", rels=mention("repo-orion", w=0.3))


# =============================================================================================
# Assembly: audit histories, salience at updated_at, relations, provenance
# =============================================================================================

EVIDENCE_TO_PROVENANCE = {"event": "event", "tool": "tool_call", "observation": "observation", "human": "observation"}


def default_sources(spec, payload):
    kind, at, by = spec["kind"], spec["at"], spec["by"]
    if kind == "episodic":
        thread = payload["timeline"][0]["ref"].split(":")[0]
        return [{"kind": "event", "ref": f"session/{thread}", "hash": sha(json.dumps(payload["timeline"], sort_keys=True)),
                 "created_by": by, "timestamp": payload["timeline"][0]["t"]}]
    if kind == "working":
        return [{"kind": "observation", "ref": f"thread/{payload['thread_id']}", "created_by": by, "timestamp": Z(at)}]
    if kind == "semantic":
        srcs = [{"kind": EVIDENCE_TO_PROVENANCE[e["source_type"]], "ref": e["source_id"], "timestamp": e["timestamp"]}
                for e in payload["evidence"]]
        return srcs or [{"kind": "observation", "ref": f"note/{spec['name']}", "created_by": by, "timestamp": Z(at)}]
    if kind == "entity":
        return [{"kind": "observation", "ref": f"mentions/{payload['canonical_name']}", "created_by": by, "timestamp": Z(at)}]
    # competence, plan_graph: the consolidation outcome plus the traces it was learned from
    label = payload.get("skill_name") or payload.get("plan_id")
    srcs = [{"kind": "outcome", "ref": f"consolidation/{label}", "hash": sha(label + spec["name"]),
             "created_by": by, "timestamp": Z(at)}]
    for rel in spec["rels"]:
        if rel[0] == "derived_from" and rel[1].startswith("e:"):
            srcs.append({"kind": "event", "ref": I(rel[1]), "timestamp": Z(when(rel[3]) if len(rel) > 3 else at)})
    return srcs


def build(spec) -> dict:
    kind, name = spec["kind"], spec["name"]
    rid, created, dec = I(name), spec["at"], copy.deepcopy(spec["dec"])
    payload = {"kind": kind, **copy.deepcopy(spec["payload"])}
    relations, audit = [], []

    def rel(pred, target, weight, t):
        relations.append({"predicate": pred, "target_id": I(target), "weight": weight, "created_at": Z(t)})

    why = spec["why"]
    if spec["supersedes"]:
        why = f"supersedes {I(spec['supersedes'])}: {why}"
        rel("supersedes", spec["supersedes"], 1.0, created)
        if kind == "semantic":
            payload["revision"]["supersedes"] = I(spec["supersedes"])
    if spec["forked_from"]:
        why = f"forked from {I(spec['forked_from'])}: {why}"
        rel("derived_from", spec["forked_from"], 1.0, created)
    if spec["merged_from"]:
        why = f"merged from {', '.join(I(n) for n in spec['merged_from'])}: {why}"
        for n in spec["merged_from"]:
            rel("derived_from", n, 1.0, created)
    for r in spec["rels"]:
        rel(r[0], r[1], r[2], when(r[3]) if len(r) > 3 else created)
    audit.append({"action": "create", "actor": spec["by"], "timestamp": Z(created), "rationale": why})

    pinned = spec["pinned"] and not any(h[0] == "pin" for h in spec["history"])
    s, a, last_reinforced, prev = float(spec["sal"]), created, created, created
    for h in spec["history"]:
        action, t, actor, rationale = h[0], T(h[1]), h[2], h[3]
        extra = h[4] if len(h) > 4 else None
        assert t >= prev, f"{name}: history out of order at {h[1]}"
        prev = t
        cur = salience_at(s, a, t, created, dec, pinned)
        if action == "reinforce":
            gain = dec["reinforcement_gain"] if extra is None else extra
            s, act = max(cur, min(cur + gain, 1.0)), "reinforce"
            last_reinforced = t
        elif action == "penalize":
            s, act = max(cur - extra, min(cur, dec["min_salience"])), "decay"
            rationale = "penalty: " + rationale
        elif action in ("revise", "reclassify"):
            s, act = cur, "revise"
        elif action == "pin":
            s, act, pinned = cur, "revise", True
            rationale = "pinned: " + rationale
        elif action == "boost":
            s, act = float(extra), "revise"
        elif action == "retract":
            s, act = 0.0, "delete"
            rationale = "retracted: " + rationale
            if kind == "semantic":
                payload["revision"]["status"] = "retracted"
        elif action == "superseded":
            s, act = 0.0, "revise"
            rationale = f"superseded by {I(extra)}: {rationale}"
            if kind == "semantic":
                payload["revision"]["status"] = "retracted"
                payload["revision"]["superseded_by"] = I(extra)
        elif action == "contest":
            s, act = cur, "revise"
            rationale = f"contested by {I(extra)}: {rationale}"
            assert kind == "semantic"
            payload["revision"]["status"] = "contested"
            rel("contested_by", extra, 0.8, t)
        elif action == "fork":
            s, act = cur, "fork"
            rationale = f"forked into {I(extra)}: {rationale}"
        elif action == "merge":
            s, act = 0.0, "merge"
            rationale = f"merged into {I(extra)}: {rationale}"
            if kind == "semantic":
                payload["revision"]["status"] = "retracted"
        else:
            raise ValueError(f"{name}: unknown history action {action}")
        a = t
        audit.append({"action": act, "actor": actor, "timestamp": Z(t), "rationale": rationale})
    assert pinned == spec["pinned"], f"{name}: pinned flag and history disagree"

    sources = spec["sources"] or default_sources(spec, payload)
    if spec["supersedes"]:
        sources = sources + [{"kind": "event", "ref": I(spec["supersedes"]), "timestamp": Z(created)}]
    return {
        "id": rid,
        "type": kind,
        "sensitivity": spec["sens"],
        "confidence": spec["conf"],
        "salience": round(s, 6),
        "scope": spec["scope"],
        "tags": spec["tags"],
        "created_at": Z(created),
        "updated_at": Z(a),
        "lifecycle": {
            "decay": dec,
            "last_reinforced_at": Z(last_reinforced),
            "pinned": pinned,
            "deletion_policy": spec["policy"],
        },
        "provenance": {"sources": sources, "created_by": spec["creator"]},
        "relations": relations,
        "payload": payload,
        "audit_log": audit,
    }


# =============================================================================================
# Selector arithmetic (SPEC sections 3 and 5), independent of membrane_engine
# =============================================================================================

def parse(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def decision(rec, max_sensitivity, scopes):
    allowed = not scopes or rec["scope"] == "" or rec["scope"] in scopes
    lvl, top = LEVEL[rec["sensitivity"]], LEVEL[max_sensitivity]
    if allowed and lvl <= top:
        return "full"
    if allowed and lvl == top + 1:
        return "redacted"
    return "hidden"


def selector_score(rec, as_of):
    conf = rec["confidence"]
    p = rec["payload"]
    if rec["type"] == "competence":
        perf = p.get("performance") or {}
        n = perf.get("success_count", 0) + perf.get("failure_count", 0)
        success = perf["success_count"] / n if n > 0 else 0.5
    else:
        m = p.get("metrics") or {}
        success = 1.0 - m["failure_rate"] if m.get("execution_count", 0) > 0 else 0.5
    lra = rec["lifecycle"].get("last_reinforced_at")
    if not lra:
        recency = 0.5
    else:
        delta = (as_of - parse(lra)).total_seconds()
        recency = 1.0 if delta < 0 else 0.5 ** (delta / (30 * DAY))
    return (conf + success + recency) / 3.0, (conf, success, recency)


def select(records, max_sensitivity, scopes=(), memory_types=(), as_of=NOW, threshold=0.7):
    scores = {}
    for r in records:
        if r["type"] not in ("competence", "plan_graph"):
            continue
        if memory_types and r["type"] not in memory_types:
            continue
        d = decision(r, max_sensitivity, list(scopes))
        if d == "hidden":
            continue
        scores[r["id"]] = 0.5 if d == "redacted" else selector_score(r, as_of)[0]
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        conf = 0.0
    elif len(ranked) == 1:
        conf = min(ranked[0][1], 1.0)
    else:
        best, second = ranked[0][1], ranked[1][1]
        conf = (best - second) / best if best > 0 else 0.0
    return {"selected": ranked[0][0] if ranked else None, "confidence": conf,
            "needs_more": conf < threshold, "scores": dict(ranked)}


# The designed scenario: project-alpha, competence layer, two "debug flaky pytest e2e test" records
# (v1 low, v2 high) plus the hyper key-rotation skill. (max_sensitivity, expected needs_more, expected selected)
SCENARIO_SCOPES = ["project-alpha"]
SCENARIO_TYPES = ["competence"]
SCENARIO = [
    ("public", True, "c:flaky-pytest-v1"),   # v1 redacted (0.5 flat), alone -> confidence 0.5
    ("low", False, "c:flaky-pytest-v1"),     # v1 full and alone -> confidence = its score (~0.87)
    ("medium", True, "c:flaky-pytest-v1"),   # v2 redacted at 0.5 -> (0.87 - 0.5) / 0.87 ~ 0.43
    ("high", True, "c:flaky-pytest-v2"),     # both full, near tie; rotation skill redacted at 0.5
    ("hyper", True, "c:flaky-pytest-v2"),    # everything full, near tie
]


# =============================================================================================
# Self-checks
# =============================================================================================

TS_KEYS = {"created_at", "updated_at", "timestamp", "t", "last_reinforced_at", "last_used_at",
           "last_executed_at", "start", "end"}
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def walk_timestamps(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in TS_KEYS and isinstance(v, str):
                yield f"{path}.{k}", v
            else:
                yield from walk_timestamps(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk_timestamps(v, f"{path}[{i}]")


def check(records):
    problems = []

    def bad(rec, msg):
        problems.append(f"{rec.get('id')} ({NAMES.get(rec.get('id'), '?')}): {msg}")

    by_id = {}
    for r in records:
        if r["id"] in by_id:
            bad(r, "duplicate id")
        by_id[r["id"]] = r
        uuid.UUID(r["id"])

    for r in records:
        p, lc = r["payload"], r["lifecycle"]
        created, updated = parse(r["created_at"]), parse(r["updated_at"])
        # enums and ranges
        if r["type"] not in TYPES: bad(r, "type")
        if p.get("kind") != r["type"]: bad(r, "payload.kind != type")
        if r["sensitivity"] not in SENSITIVITY: bad(r, "sensitivity")
        if not 0 <= r["confidence"] <= 1: bad(r, "confidence")
        if not (r["salience"] >= 0 and r["salience"] == r["salience"]): bad(r, "salience")
        d = lc["decay"]
        if d["curve"] not in CURVES: bad(r, "curve")
        if not (isinstance(d["half_life_seconds"], int) and d["half_life_seconds"] >= 1): bad(r, "half_life")
        if not (isinstance(d["max_age_seconds"], int) and d["max_age_seconds"] >= 0): bad(r, "max_age")
        if d["min_salience"] < 0: bad(r, "min_salience")
        if d["curve"] == "custom":
            pts = d.get("points")
            if not pts or pts[0] != [0, 1.0]: bad(r, "custom points must start at [0, 1.0]")
            elif any(b[0] <= a_[0] or b[1] > a_[1] for a_, b in zip(pts, pts[1:])): bad(r, "custom points not monotone")
        elif "points" in d:
            bad(r, "points on a non-custom curve")
        if lc["deletion_policy"] not in POLICIES: bad(r, "deletion_policy")
        if not isinstance(r["tags"], list) or not r["tags"]: bad(r, "tags")
        # time
        for path, v in walk_timestamps(r):
            if not TS_RE.match(v):
                bad(r, f"timestamp format {path}={v}")
            elif not EARLIEST <= parse(v) <= NOW:
                bad(r, f"timestamp out of range {path}={v}")
        if updated < created: bad(r, "updated_at < created_at")
        if not created <= parse(lc["last_reinforced_at"]) <= updated: bad(r, "last_reinforced_at outside [created, updated]")
        if len(set(r["tags"])) != len(r["tags"]): bad(r, "a tag twice")
        # audit
        al = r["audit_log"]
        if not al or al[0]["action"] != "create" or al[0]["timestamp"] != r["created_at"]: bad(r, "first audit entry must be create at created_at")
        if al[-1]["timestamp"] != r["updated_at"]: bad(r, "last audit entry must be at updated_at")
        for x, y in zip(al, al[1:]):
            if parse(y["timestamp"]) < parse(x["timestamp"]): bad(r, "audit out of order")
        for e in al:
            if e["action"] not in AUDIT_ACTIONS or not e["actor"] or not e["rationale"]: bad(r, f"audit entry {e}")
        # provenance
        if not r["provenance"]["sources"]: bad(r, "no provenance source")
        for s_ in r["provenance"]["sources"]:
            if s_["kind"] not in PROV_KINDS or not s_["ref"]: bad(r, f"provenance source {s_}")
        # relations
        for rel in r["relations"]:
            t = by_id.get(rel["target_id"])
            if t is None:
                bad(r, f"relation target missing {rel}")
                continue
            if rel["target_id"] == r["id"]: bad(r, "self relation")
            if not 0 <= rel["weight"] <= 1: bad(r, "relation weight")
            rt = parse(rel["created_at"])
            if rt < created or rt < parse(t["created_at"]):
                bad(r, f"relation {rel['predicate']} -> {NAMES[t['id']]} predates one of its ends")
            if rel["predicate"] == "mentions_entity" and t["type"] != "entity": bad(r, "mentions_entity to a non-entity")
        # payload shapes
        k = r["type"]
        if k == "episodic":
            if not 3 <= len(p["timeline"]) <= 8: bad(r, f"timeline has {len(p['timeline'])} events")
            if p["outcome"] not in OUTCOMES: bad(r, "outcome")
            ids = set()
            for node in p["tool_graph"]:
                if any(dep not in ids for dep in node["depends_on"]): bad(r, f"tool_graph dependency of {node['id']}")
                ids.add(node["id"])
            if not p["tool_graph"]: bad(r, "empty tool_graph")
            e = p["environment"]
            if not all(e.get(x) for x in ("os", "os_version", "tool_versions", "working_directory")) or "context" not in e: bad(r, "environment")
        elif k == "working":
            if p["state"] not in TASK_STATE: bad(r, "state")
            if not p["active_constraints"]: bad(r, "no constraints")
            if not p["context_summary"]: bad(r, "context_summary")
        elif k == "semantic":
            if p["validity"]["mode"] not in VALIDITY: bad(r, "validity mode")
            if p["revision"]["status"] not in REVISION_STATUS: bad(r, "revision status")
            if not p["evidence"]: bad(r, "no evidence")
            for e in p["evidence"]:
                if e["source_type"] not in EVIDENCE_TYPES: bad(r, "evidence source_type")
            rev = p["revision"]
            if rev["superseded_by"]:
                new = by_id.get(rev["superseded_by"])
                if not new or new["payload"]["revision"]["supersedes"] != r["id"]: bad(r, "supersede chain broken")
                if rev["status"] != "retracted" or r["salience"] != 0: bad(r, "superseded record must be retracted at salience 0")
            if rev["supersedes"]:
                if not any(x["predicate"] == "supersedes" and x["target_id"] == rev["supersedes"] for x in r["relations"]):
                    bad(r, "missing supersedes relation")
            if rev["status"] == "contested" and not any(x["predicate"] == "contested_by" for x in r["relations"]):
                bad(r, "contested without contested_by")
            if rev["status"] == "retracted" and r["salience"] != 0: bad(r, "retracted with salience")
        elif k == "competence":
            perf = p["performance"]
            n = perf["success_count"] + perf["failure_count"]
            if n and abs(perf["success_rate"] - perf["success_count"] / n) > 1e-4: bad(r, "success_rate")
            if not (p["triggers"] and p["recipe"] and p["required_tools"]): bad(r, "competence content")
        elif k == "plan_graph":
            ids = {n_["id"] for n_ in p["nodes"]}
            if len(p["nodes"]) < 5: bad(r, "plan with < 5 nodes")
            for e in p["edges"]:
                if e["from"] not in ids or e["to"] not in ids or e["kind"] not in EDGE_KINDS: bad(r, f"edge {e}")
            if not 0 <= p["metrics"]["failure_rate"] <= 1: bad(r, "failure_rate")
        elif k == "entity":
            if not (p["canonical_name"] and p["primary_type"] and p["types"] and p["identifiers"] and p["summary"]): bad(r, "entity content")
        if any(e["action"] == "delete" for e in r["audit_log"]) and r["salience"] != 0: bad(r, "deleted but salient")

        # leak canaries: FAKE only in payloads of high/hyper records
        outside = {k_: v for k_, v in r.items() if k_ != "payload"}
        level = LEVEL[r["sensitivity"]]
        if level >= LEVEL["high"]:
            if "FAKE" not in json.dumps(p): bad(r, "high/hyper payload without a FAKE canary")
            if "fake" in json.dumps(outside).lower(): bad(r, "canary outside the payload")
        elif "fake" in json.dumps(r).lower():
            bad(r, "public/low/medium record contains 'fake'")

    # every high/hyper record has at least one canary token no other record has
    token_re = re.compile(r"[A-Za-z0-9_.:/@+\-]*FAKE[A-Za-z0-9_.:/@+\-]*")
    owners = {}
    for r in records:
        for tok in set(token_re.findall(json.dumps(r["payload"]))):
            owners.setdefault(tok, set()).add(r["id"])
    for r in records:
        if LEVEL[r["sensitivity"]] >= LEVEL["high"]:
            mine = [t for t, o in owners.items() if o == {r["id"]}]
            shared = [t for t, o in owners.items() if r["id"] in o]
            if not mine and not shared: bad(r, "no canary token")
    return problems


def summarize(records):
    from collections import Counter
    print(f"{len(records)} records")
    for label, key in (("type", lambda r: r["type"]), ("sensitivity", lambda r: r["sensitivity"]),
                       ("scope", lambda r: r["scope"] or '""'), ("curve", lambda r: r["lifecycle"]["decay"]["curve"]),
                       ("deletion_policy", lambda r: r["lifecycle"]["deletion_policy"])):
        c = Counter(key(r) for r in records)
        order = {"type": TYPES, "sensitivity": SENSITIVITY}.get(label)
        items = [(k, c[k]) for k in order] if order else sorted(c.items())
        print(f"  by {label}: " + ", ".join(f"{k}={v}" for k, v in items))
    rel = Counter(x["predicate"] for r in records for x in r["relations"])
    print("  relations: " + ", ".join(f"{k}={v}" for k, v in sorted(rel.items())))
    audit = Counter(e["action"] for r in records for e in r["audit_log"])
    print("  audit actions: " + ", ".join(f"{k}={audit[k]}" for k in AUDIT_ACTIONS))
    multi = sum(1 for r in records if len(r["audit_log"]) > 1)
    pinned = sum(1 for r in records if r["lifecycle"]["pinned"])
    zero = sum(1 for r in records if r["salience"] == 0)
    status = Counter(r["payload"]["revision"]["status"] for r in records if r["type"] == "semantic")
    print(f"  multi-entry audit logs: {multi}; pinned: {pinned}; salience 0: {zero}; "
          f"semantic status: " + ", ".join(f"{k}={v}" for k, v in sorted(status.items())))
    above_one = [NAMES[r["id"]] for r in records if r["salience"] > 1]
    print(f"  salience > 1: {above_one}")
    return Counter(r["type"] for r in records), Counter(r["sensitivity"] for r in records), Counter(r["scope"] for r in records)


def selector_report(records):
    by_id = {r["id"]: r for r in records}
    failures = []
    print(f"\nselector at as_of {Z(NOW)} (threshold 0.7, min_salience 0):")
    for name in ("c:flaky-pytest-v1", "c:flaky-pytest-v2", "c:rotate-jwt-key"):
        r = by_id[I(name)]
        score, (c, s, rec) = selector_score(r, NOW)
        print(f"  {name:20s} {r['id']} {r['sensitivity']:6s} conf={c:.2f} success={s:.4f} "
              f"recency={rec:.4f} score={score:.5f}")
    print(f"  scopes={SCENARIO_SCOPES} memory_types={SCENARIO_TYPES}:")
    for max_s, want, want_sel in SCENARIO:
        res = select(records, max_s, SCENARIO_SCOPES, SCENARIO_TYPES)
        print(f"    max_sensitivity={max_s:6s} candidates={len(res['scores'])} selected={NAMES.get(res['selected'])} "
              f"confidence={res['confidence']:.5f} needs_more={res['needs_more']}")
        if res["needs_more"] != want or res["selected"] != I(want_sel):
            failures.append(f"scenario {max_s}: got needs_more={res['needs_more']} selected={NAMES.get(res['selected'])}")
    print("  other contexts (informational):")
    for scopes, types in ((["project-alpha"], []), (["project-orion"], []), (["infra-ops"], []), ([], [])):
        for max_s in SENSITIVITY:
            res = select(records, max_s, scopes, types)
            print(f"    scopes={scopes or 'all'} types={types or 'all'} max={max_s:6s} n={len(res['scores']):2d} "
                  f"selected={NAMES.get(res['selected'])} confidence={res['confidence']:.5f} needs_more={res['needs_more']}")
    return failures


# =============================================================================================
# main
# =============================================================================================

NAMES = {I(n): n for n in SPECS}


def main() -> int:
    records = [build(spec) for spec in SPECS.values()]
    records.sort(key=lambda r: (r["created_at"], r["id"]))
    types, sens, scopes = summarize(records)
    problems = check(records)
    problems += selector_report(records)
    # coverage requirements
    if len(records) < 150: problems.append("fewer than 150 records")
    for t in TYPES:
        if types[t] < 5: problems.append(f"too few {t} records")
    if sens["high"] < 10 or sens["hyper"] < 8 or min(sens[s] for s in SENSITIVITY) < 8:
        problems.append(f"sensitivity mix too thin: {dict(sens)}")
    if len([s for s in scopes if s]) < 3 or scopes[""] < 20:
        problems.append(f"scope mix: {dict(scopes)}")
    if problems:
        print("\nSELF-CHECK FAILED:")
        for p in problems:
            print("  " + p)
        return 1
    OUT.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nself-checks passed; wrote {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
