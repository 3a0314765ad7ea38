"""Policy files (SPEC 11): every assertion form and verdict, selections checked against the
scalar rule, failures with explain's reasons, snapshots and their diff, "who gains access"
for each operation, and that none of it writes to the store. On both databases."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from membrane_engine import Membrane
from membrane_engine.oversight.exposure import import_exposures, plan_exposures
from membrane_engine.policy.check import PolicyError, Selection, check, coverage, parse_policy
from membrane_engine.policy.snapshots import current, diff, read, write

from tests.support.records import rec

PROFILES = """
[profiles.agent]
max_sensitivity = "medium"
scopes = ["alpha"]

[profiles.ops]
max_sensitivity = "high"
scopes = ["beta"]

[profiles.peek]
max_sensitivity = "low"
"""

# id -> (type, sensitivity, scope, tags); verdicts for agent / ops / peek in the comments.
RECORDS = {
    "a": ("semantic", "low", "alpha", ["pii"]),            # full   hidden  full
    "b": ("semantic", "medium", "alpha", []),              # full   hidden  redacted
    "c": ("episodic", "high", "beta", ["secret"]),         # hidden full    hidden
    "d": ("entity", "public", "", []),                     # full   full    full
    "e": ("working", "hyper", "alpha", ["pii", "secret"]),  # hidden hidden  hidden
    "f": ("semantic", "high", "alpha", ["pii"]),           # redacted hidden hidden
}


@pytest.fixture
def store(mem: Membrane) -> Membrane:
    mem.import_records([rec(i, t, sensitivity=s, scope=sc, tags=tg) for i, (t, s, sc, tg) in RECORDS.items()])
    return mem


def policy(*asserts: str):
    return parse_policy(PROFILES + "".join(f"\n[[assert]]\n{a}\n" for a in asserts), "test.toml")


def one(m: Membrane, body: str):
    return check(m, policy(body)).outcomes[0]


@pytest.mark.parametrize("profile,records,expect,holds", [
    ("agent", '{ ids = ["a", "b", "d"] }', "full", True),
    ("agent", '{ ids = ["a", "f"] }', "full", False),
    ("agent", '{ ids = ["f"] }', "redacted", True),
    ("peek", '{ ids = ["b"] }', "redacted", True),
    ("agent", '{ scopes = ["beta"] }', "hidden", True),
    ("agent", '{ tags = ["pii"] }', "hidden", False),
    ("agent", '{ sensitivity = ["high", "hyper"] }', "not-full", True),
    ("agent", '{ sensitivity = ["medium"] }', "not-full", False),
    ("agent", '{ types = ["semantic"] }', "visible", True),
    ("ops", '{ types = ["semantic"] }', "visible", False),
])
def test_every_expect_form(store: Membrane, profile: str, records: str, expect: str, holds: bool) -> None:
    out = one(store, f'profile = "{profile}"\nrecords = {records}\nexpect = "{expect}"')
    assert out.passed is holds, out.message
    assert (out.offending == 0) is holds


@pytest.mark.parametrize("verdict,bounds,holds,offending", [
    ("full", "max = 0", False, 4),       # agent sees a, b, d in full... and nothing else full
    ("full", "min = 3", True, 0),
    ("full", "min = 4", False, 0),       # too few: no record is "at fault"
    ("redacted", "max = 1", True, 0),
    ("hidden", "min = 2\nmax = 2", True, 0),
    ("hidden", "max = 1", False, 2),
])
def test_bounds(store: Membrane, verdict: str, bounds: str, holds: bool, offending: int) -> None:
    sel = '{ sensitivity = ["public", "low", "medium", "high", "hyper"], scopes = ["alpha", "beta", ""] }'
    out = one(store, f'profile = "agent"\nrecords = {sel}\nverdict = "{verdict}"\n{bounds}')
    counts = {"full": 3, "redacted": 1, "hidden": 2}
    assert out.counts == counts
    if verdict == "full" and "max = 0" in bounds:
        offending = 3
    assert out.passed is holds and out.offending == offending
    assert len(out.shown) == offending


def test_failure_names_the_records_with_explains_reasons_and_no_hidden_labels(store: Membrane) -> None:
    out = one(store, 'profile = "agent"\nrecords = { tags = ["pii"] }\nexpect = "full"')
    assert not out.passed and [o.id for o in out.shown] == ["e", "f"]
    for o in out.shown:
        trust = policy().trust("agent")
        assert list(o.reasons) == store.explain(o.id, trust).reasons
        assert o.verdict == store.explain(o.id, trust).verdict.value
    e, f = out.shown
    assert e.verdict == "hidden" and e.tags is None  # hidden: explain's labels only, no tags
    assert f.verdict == "redacted" and f.tags == ("pii",)  # a redacted view keeps tags


def test_unknown_ids_fail_the_assertion(store: Membrane) -> None:
    out = one(store, 'profile = "agent"\nrecords = { ids = ["a", "nope"] }\nexpect = "full"')
    assert not out.passed and "nope" in out.message


def test_selections_match_the_scalar_rule_on_random_stores(mem: Membrane) -> None:
    rng = random.Random(7)
    types = ["semantic", "episodic", "entity", "working"]
    sens = ["public", "low", "medium", "high", "hyper"]
    scopes = ["", "alpha", "beta", "gamma"]
    tags = ["pii", "x", "y_z", "%"]
    docs = [rec(f"r{k}", rng.choice(types), sensitivity=rng.choice(sens), scope=rng.choice(scopes),
                tags=rng.sample(tags, rng.randint(0, 2))) for k in range(80)]
    mem.import_records(docs)
    pol = policy()
    for _ in range(25):
        sel = Selection(ids=tuple(rng.sample([d["id"] for d in docs], rng.randint(0, 3)) if rng.random() < .3 else ()),
                        types=tuple(rng.sample(types, rng.randint(0, 2))), scopes=tuple(rng.sample(scopes, rng.randint(0, 2))),
                        tags=tuple(rng.sample(tags, rng.randint(0, 1))), sensitivity=tuple(rng.sample(sens, rng.randint(0, 2))))
        for name in pol.profiles:
            trust = pol.trust(name)
            expected = {"full": 0, "redacted": 0, "hidden": 0}
            for d in docs:
                if ((not sel.ids or d["id"] in sel.ids) and (not sel.types or d["type"] in [t.value for t in sel.types])
                        and (not sel.scopes or d["scope"] in sel.scopes) and (not sel.tags or set(sel.tags) & set(d["tags"]))
                        and (not sel.sensitivity or d["sensitivity"] in [s.value for s in sel.sensitivity])):
                    expected[mem.explain(d["id"], trust).verdict.value] += 1
            body = (f'profile = "{name}"\nrecords = {sel.model_dump_json()}\nverdict = "full"\nmin = 0')
            body = body.replace('"ids":', "ids =").replace('"types":', "types =").replace('"scopes":', "scopes =")
            body = body.replace('"tags":', "tags =").replace('"sensitivity":', "sensitivity =").replace('":', '" =')
            assert one(mem, body).counts == expected, (name, sel)


def test_coverage_names_what_no_assertion_selects(store: Membrane) -> None:
    pol = policy('profile = "agent"\nrecords = { scopes = ["alpha"] }\nexpect = "visible"')
    cov = coverage(store, pol)
    assert cov["records"] == 6 and cov["covered"] == 4
    assert cov["profiles_unused"] == ["ops", "peek"]
    assert cov["by"]["scope"]["beta"] == (1, 1) and cov["by"]["scope"]["(unscoped)"] == (1, 1)
    assert cov["per_profile"] == {"agent": 4, "ops": 0, "peek": 0}


def test_checks_snapshots_and_previews_write_nothing(store: Membrane, tmp_path: Path) -> None:
    before = (store.metrics()["total_audit_entries"], store.columns.current().seq)
    pol = policy('profile = "agent"\nexpect = "full"')
    check(store, pol)
    write(store, pol, tmp_path / "s.jsonl")
    plan_exposures(store.preview("reclassify", "c", "t", "r", scope="alpha"), {"a": pol.trust("agent")})
    store.columns.invalidate()
    assert (store.metrics()["total_audit_entries"], store.columns.current().seq) == before
    assert store.verify_audit() == []


def test_snapshot_round_trip_and_a_widening_reclassify_shows_as_a_gain_first(store: Membrane, tmp_path: Path) -> None:
    pol = policy()
    path = tmp_path / "seen.jsonl"
    n = write(store, pol, path)
    assert n == 4 + 2 + 3  # visible (profile, record) pairs: agent a b d f, ops c d, peek a b d
    first = path.read_bytes()
    write(store, pol, path)
    assert path.read_bytes() == first  # stable: the same bytes for the same store
    assert read(path).profiles == current(store, pol).profiles
    assert diff(read(path), current(store, pol)) == []

    store.reclassify("c", "tester", "widen", scope="alpha", sensitivity="medium")  # agent gains c
    store.reclassify("a", "tester", "narrow", sensitivity="hyper")  # agent, peek lose a
    changes = diff(read(path), current(store, pol))
    summary = [(c.profile, c.id, c.before, c.after, c.gain) for c in changes]
    assert summary == [
        ("agent", "c", "hidden", "full", True),
        ("peek", "c", "hidden", "redacted", True),  # medium is one above peek's low
        ("agent", "a", "full", "hidden", False),
        ("ops", "c", "full", "hidden", False),
        ("peek", "a", "full", "hidden", False),
    ]


def _verdicts(exposures, profile: str) -> dict[str, tuple[str, str]]:
    return {e.id: (e.before, e.after) for e in exposures.changes if e.profile == profile}


def test_who_gains_access_for_each_operation(store: Membrane) -> None:
    pol = policy()
    profiles = {name: pol.trust(name) for name in pol.profiles}
    new = rec("", "semantic", sensitivity="low", scope="alpha",
              provenance={"sources": [{"kind": "observation", "ref": "x"}]})

    ex = plan_exposures(store.preview("reclassify", "f", "t", "r", sensitivity="medium"), profiles)
    assert _verdicts(ex, "agent") == {"f": ("redacted", "full")} and ex.widens
    assert ex.gained("agent") == 1 and ex.lost("agent") == 0

    narrow = plan_exposures(store.preview("reclassify", "a", "t", "r", sensitivity="high"), profiles)
    assert not narrow.widens and narrow.lost("agent") == 1 and narrow.lost("peek") == 1

    ex = plan_exposures(store.preview("supersede", "b", dict(new, id="b2"), "t", "r"), profiles)
    # b stays (retraction does not change its gate); b2 is new: full to agent and peek
    assert _verdicts(ex, "agent") == {"b2": ("hidden", "full")}
    assert _verdicts(ex, "peek") == {"b2": ("hidden", "full")} and ex.widens

    ex = plan_exposures(store.preview("fork", "a", dict(new, id="a2", scope="beta"), "t", "r"), profiles)
    assert _verdicts(ex, "ops") == {"a2": ("hidden", "full")} and _verdicts(ex, "agent") == {}

    ex = plan_exposures(store.preview("merge", ["a", "b"], dict(new, id="m", sensitivity="medium"), "t", "r"), profiles)
    assert _verdicts(ex, "agent") == {"m": ("hidden", "full")} and _verdicts(ex, "peek") == {"m": ("hidden", "redacted")}

    store.delete("d", "t", "r")
    assert plan_exposures(store.preview("delete", "a", "t", "r"), profiles).lost("agent") == 1
    ex = plan_exposures(store.preview("restore", "d", "t", "r"), profiles)
    assert {p: _verdicts(ex, p) for p in profiles} == {p: {"d": ("hidden", "full")} for p in profiles}

    ex = import_exposures([rec("n1", sensitivity="high", scope="beta"), rec("n2", sensitivity="hyper")], profiles)
    assert _verdicts(ex, "ops") == {"n1": ("hidden", "full"), "n2": ("hidden", "redacted")}
    assert _verdicts(ex, "peek") == {}
    assert ex.counts["agent"] == {} and ex.widens

    pinned = plan_exposures(store.preview("pin", "a", "t", "r"), profiles)
    assert not pinned.widens and pinned.changes == []


def test_gains_come_first_in_exposures(store: Membrane) -> None:
    pol = policy()
    profiles = {"agent": pol.trust("agent")}
    plans = [store.preview("reclassify", "a", "t", "r", sensitivity="hyper"),
             store.preview("reclassify", "c", "t", "r", scope="alpha", sensitivity="low")]
    ex = plan_exposures(plans, profiles)
    assert [(e.id, e.gain) for e in ex.changes] == [("c", True), ("a", False)]


# ----------------------------------------------------------------------------- invalid files

BAD = [
    ("syntax", PROFILES + '\n[[assert]]\nprofile = "agent"\nexpect = full\n', 15, "(syntax)"),
    ("unknown profile", PROFILES + '\n[[assert]]\nprofile = "agnet"\nexpect = "full"\n', 14, "assert[0].profile"),
    ("unknown verdict", PROFILES + '\n[[assert]]\nprofile = "agent"\nexpect = "visble"\n', 15, "assert[0].expect"),
    ("unknown key", PROFILES + '\n[[assert]]\nprofile = "agent"\nexpct = "full"\n', 15, "assert[0].expct"),
    ("unknown selection key", PROFILES + '\n[[assert]]\nprofile = "agent"\nrecords = { tag = ["x"] }\nexpect = "full"\n',
     15, "assert[0].records.tag"),
    ("unknown sensitivity in a profile", PROFILES.replace('"high"', '"secret"'), 7, "profiles.ops.max_sensitivity"),
    ("bounds without a verdict", PROFILES + '\n[[assert]]\nprofile = "agent"\nmax = 3\n', 13, "assert[0]"),
    ("second assertion", PROFILES + '\n[[assert]]\nprofile = "agent"\nexpect = "full"\n\n[[assert]]\n'
     'profile = "ops"\nverdict = "fll"\nmax = 1\n', 19, "assert[1].verdict"),
    ("top-level key", 'version = 2\n' + PROFILES, 1, "version"),
]


@pytest.mark.parametrize("case,text,line,key", BAD, ids=[b[0] for b in BAD])
def test_invalid_files_name_line_and_key(case: str, text: str, line: int, key: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.toml")
    located = info.value.located
    assert (located[0][0], located[0][1]) == (line, key), located
    assert f"p.toml:{line}: {key}" in str(info.value)


def test_line_finder_reads_subtables_of_array_items() -> None:
    text = PROFILES + '\n[[assert]]\nprofile = "agent"\nexpect = "full"\n\n[[assert]]\nprofile = "agent"\nexpect = "full"\n' \
        '\n[assert.records]\ntypes = ["semantc"]\n'
    with pytest.raises(PolicyError) as info:
        parse_policy(text)
    assert info.value.located[0][:2] == (22, "assert[1].records.types[0]")


def test_sample_policy_holds_on_the_sample_store(sample_membrane: Membrane) -> None:
    pol = parse_policy(Path("sample_data/policies.toml").read_text(), "sample_data/policies.toml")
    report = check(sample_membrane, pol)
    assert report.passed, [o.message for o in report.failures]
    assert 10 <= len(pol.assertions) <= 16 and report.covered == report.total
    forms = {a.expect.value if a.expect else "bounds" for a in pol.assertions}
    assert forms == {"full", "redacted", "hidden", "not-full", "visible", "bounds"}
    assert list(itertools.chain(*[o.shown for o in report.outcomes])) == []


def test_the_documented_example_is_a_valid_policy_file() -> None:
    doc = Path(__file__).resolve().parents[2].joinpath("docs", "policies.md").read_text()
    block = doc.split("## The format", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    pol = parse_policy(block, "docs/policies.md")
    assert list(pol.profiles) == ["support-bot"] and len(pol.assertions) == 4
