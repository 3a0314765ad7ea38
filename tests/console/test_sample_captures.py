"""sample_data/captures.json: kestrel's next working day, replayed as the demo replays it
(`membrane-console capture sample_data/captures.json`, then `membrane-console consolidate`) on a
copy of the sample store. Its mentions resolve to the sample's entities (by alias, in another
case) or create new ones once; its observations derive facts about those entities; and the
consolidation that follows links what it extracts to an entity the captures created."""

from __future__ import annotations

import json

import pytest

from console import cli
from membrane_engine import Membrane

from tests.conftest import SAMPLE

CAPTURES = SAMPLE.parent / "captures.json"

# mention -> the sample entity it must resolve to (sample_data/README.md; ids are uuid5 of names)
KNOWN = {
    "alpha": "4c89b16d-de66-57a9-a5af-448c2b7c633a",  # Project Alpha, by alias
    "Alpha": "4c89b16d-de66-57a9-a5af-448c2b7c633a",  # the same alias in another case
    "ALPHA": "4c89b16d-de66-57a9-a5af-448c2b7c633a",
    "gateway repo": "1405ad9d-e680-5538-a108-01be5320110e",  # examplecorp/alpha-gateway
    "rg": "ac84a8d5-aec4-5ed0-bd5f-458d212c948c",  # ripgrep (unscoped, from project-alpha)
    "DEV PATEL": "5dc05140-cde6-5fba-bd02-4fe9e2d738fe",  # Dev Patel, in another case
    "pkg/auth/middleware.go": "cd250bc0-2823-56c3-966e-781ebad6ca30",  # auth middleware
    # alpha-gateway is also the public repository's alias: a low capture matches only the low service
    "alpha-gateway": "782c6220-4ed7-5afb-b7a4-2898a81961a3",
    "the EU cluster": "fbb65a78-ae92-5553-b47d-666cbdc24811",  # k8s-prod-eu1 (medium) from a low capture
    "prod-eu1": "fbb65a78-ae92-5553-b47d-666cbdc24811",
    "inc-2291": "a461f116-a12f-5ea0-bcd5-c9bb732b20a1",  # INC-2291
    "tnowak": "d42432e5-eab0-562a-a054-b029644a0e39",  # Tomasz Nowak (high)
    "sofia": "0ee5c101-9e5e-51a5-b6d1-ff0205152149",  # Sofia Alvarez
    "Billing.Invoices": "6d200196-588f-5ee0-b733-6d2c2ecb5441",  # billing.invoices
    "billing db": "d9d5d7d5-488d-5a21-8e9d-8580c7a22253",  # orion-prod-db
    "@mchen-dev": "451fcbdf-fe51-5853-9e79-76b9ac291f16",  # Maya Chen (unscoped)
}
NEW = {"k6", "idle bucket eviction", "kubectl", "weekly digest"}  # no sample entity has these names


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[str, list[dict], dict]:
    url = f"sqlite:///{tmp_path_factory.mktemp('sample-captures') / 'membrane.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_file(SAMPLE)
    m.close()
    return url, run_json("capture", str(CAPTURES), "--db", url), run_json("consolidate", "--db", url)


def run_json(*argv: str):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([*argv, "--json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


def test_the_file_is_capture_requests_in_the_sample_scopes():
    requests = json.loads(CAPTURES.read_text(encoding="utf-8"))
    assert {r["source"] for r in requests} == {"kestrel"}
    assert {r.get("scope", "") for r in requests} <= {"", "project-alpha", "project-orion", "infra-ops", "user-prefs"}
    assert {r["source_kind"] for r in requests} == {"event", "tool_output", "observation", "working_state"}
    # The sample's leak canaries hold for the captures too: "FAKE" only in high and hyper content.
    for r in requests:
        text = json.dumps(r["content"])
        if r.get("sensitivity") in ("high", "hyper"):
            assert "FAKE" in text, r
        else:
            assert "fake" not in json.dumps(r).lower(), r


def test_known_entities_are_matched_and_new_ones_created_once(replayed):
    _, responses, _ = replayed
    mentions = [(m, r["primary_record"]) for r in responses for m in r["mentions"]]
    matched = {m["surface"]: m["entity_id"] for m, _ in mentions if not m["created"]}
    assert {s: matched.get(s) for s in KNOWN} == KNOWN
    created = [m for m, _ in mentions if m["created"]]
    assert sorted(m["surface"] for m in created) == sorted(NEW)
    # kubectl is created by the first health-check step and matched by the next two ("Kubectl" too)
    kubectl = [m for m, _ in mentions if m["surface"].lower() == "kubectl"]
    assert len(kubectl) == 3 and len({m["entity_id"] for m in kubectl}) == 1
    assert [m["created"] for m in kubectl] == [True, False, False]
    for r in responses:  # trust on write: what a capture creates has its scope and sensitivity
        primary = r["primary_record"]
        for made in r["created_records"]:
            assert (made.get("scope", ""), made["sensitivity"]) == (primary.get("scope", ""), primary["sensitivity"])
        assert r["primary_record"]["interpretation"]["status"] == "resolved"


def test_observations_derive_facts_about_the_entities(replayed):
    _, responses, _ = replayed
    facts = [rec["payload"] for r in responses for rec in r["created_records"] if rec["type"] == "semantic"]
    assert {(f["subject"], f["predicate"]) for f in facts} == {
        (KNOWN["alpha-gateway"], "leaks_memory_through"), (KNOWN["billing db"], "next_maintenance_window")}


def test_consolidation_links_what_it_extracts_to_a_captured_entity(replayed):
    url, responses, report = replayed
    assert report["created"] and report["reinforced"], "consolidation created or reinforced nothing"
    kubectl = next(m["entity_id"] for r in responses for m in r["mentions"] if m["surface"] == "kubectl")
    m = Membrane.open(url, load_sample=False)
    try:
        users = [m.get(rel.target_id) for rel in m.get(kubectl).relations if rel.predicate == "used_by"]
        skills = [u for u in users if u.type.value == "competence" and u.id in report["created"]]
        assert skills, "no skill consolidation created uses the kubectl entity the captures created"
        assert all(u.scope == "infra-ops" for u in users)
        assert m.verify_audit() == []
    finally:
        m.close()
