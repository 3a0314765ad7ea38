"""Every name the console keeps state under, in one place.

State lives in two stores, and each name in them is made here:

- The URL (``st.query_params``): each page's whole state, so a link, a reload and Back / Forward
  bring it back. ``Param`` names its parameters.
- The session (``st.session_state``): who is signed in, what pages share (the simulated trust
  context, the policy file in use), each page's URL bookkeeping (console/state.py), and each
  page's own widgets and entries.

A page's own keys are made by its ``PageKeys``: ``DECAY("start")`` is ``"decay_start"``. Each page
has a prefix of its own, so the keys of two pages (and of the components a page draws, which
take the page's key as their prefix) never meet; a page writes no key as a bare string.
"""

from __future__ import annotations

from dataclasses import dataclass


# ----------------------------------------------------------------------------- the URL


class Param:
    """URL parameters. The trust context's are ``TRUST_FIELDS``; what-if keeps two contexts, under
    ``CONTEXT_A`` and ``CONTEXT_B``."""

    ID = "id"  # a record: opened by the explorer, preselected by the pickers (``?id=a&id=b`` or ``?id=a,b``)
    AS_OF = "as_of"  # an instant, ISO 8601 in UTC ("2026-11-20T12:00:00Z")
    OP = "op"  # Curate's operation (only a harmless one is taken from a link)
    TASK = "task"
    MEMORY_TYPES = "memory_types"
    TYPES = "types"  # what-if's memory types
    MIN_SALIENCE = "min_salience"
    LIMIT = "limit"
    THRESHOLD = "threshold"  # the selector's needs_more threshold
    HOPS = "hops"
    ROOTS = "roots"
    NODES = "nodes"
    EDGES = "edges"
    TOKEN = "token"  # a first-run sign-in link (console/gateway.py)
    CONTEXT_A = "a_"
    CONTEXT_B = "b_"


TRUST_FIELDS = ("max_sensitivity", "scopes", "actor_id", "authenticated")


class CaptureParam:
    """The Capture page's URL parameters beside its content fields, which are kept under their
    content keys (``tool_name``, ``subject``, ...: console/app_pages/capture.py's ``FIELDS``)."""

    SOURCE = "source"
    SOURCE_KIND = "source_kind"
    EVENT_KIND = "event_kind"  # the kind typed when source_kind is another event kind
    ENTITIES = "entities"  # extra mentions, one per line
    MORE = "more"  # more content, a JSON object
    CONTEXT = "context"
    REASON = "reason"
    SUMMARY = "summary"
    PROPOSED_TYPE = "proposed_type"
    TAGS = "tags"
    SCOPE = "scope"
    SENSITIVITY = "sensitivity"
    TIMESTAMP = "timestamp"


# ----------------------------------------------------------------------------- the session, shared

SIGNED_IN = "_membrane_signed_in"  # the session's operator (console/auth.py), never sent to the browser
SESSION_TOKEN = "_membrane_session_token"  # the cookie session it was adopted from
SHARED_TRUST = "shared_trust_query"  # the simulated trust context the simulator, what-if and selector share
POLICY_UPLOAD = "shared_policy_upload"  # the policy file an operator uploaded for this session
SIGN_OUT = "auth_sign_out"  # the sidebar's button


class PageQuery:
    """console/state.py's bookkeeping of each page's URL state: a prefix each, then the page's name."""

    LAST = "page_query_"  # the query the page last wrote
    ARRIVED_AT = "page_arrived_at_"  # the URL the page was restored from
    HELD = "page_held_"  # the state it was restored to, until the operator changes something
    BARE_STATE = "page_bare_state_"  # what a bare address (the sidebar's navigation) showed
    WIDGETS = "page_widgets_"  # the key prefixes of its widgets
    LEFT = "page_left_"  # their values when the page last ran
    CAME_FROM = "page_came_from_"  # the page the operator came from, on the run they arrived
    RUNNING = "page_running"  # the page of the current run (one entry, not per page)


# ----------------------------------------------------------------------------- each page's own


@dataclass(frozen=True)
class PageKeys:
    """A page's name (its access-log entries read "page:NAME"; its slot in the URL bookkeeping)
    and the prefix of every key it keeps in the session."""

    name: str
    prefix: str

    def __call__(self, *parts: object) -> str:
        """The page's key for ``parts``: ``RECORDS("page", 3)`` is ``"rx_page_3"``."""
        return "_".join([self.prefix, *(str(p) for p in parts)])


OVERVIEW = PageKeys("overview", "overview")
SIMULATOR = PageKeys("simulator", "sim")
WHAT_IF = PageKeys("what_if", "wi")
WHAT_IF_A = PageKeys("what_if", "wa")  # what-if's context A form
WHAT_IF_B = PageKeys("what_if", "wb")  # and its context B form
RECORDS = PageKeys("records", "rx")
DECAY = PageKeys("decay", "decay")
SELECTOR = PageKeys("selector", "sel")
POLICIES = PageKeys("policies", "policy")
GRAPH = PageKeys("graph", "gr")
AUDIT = PageKeys("audit", "audit")
CURATE = PageKeys("curate", "curate")
REVIEW = PageKeys("review", "rv")
CAPTURE = PageKeys("capture", "cap")
IMPORT_EXPORT = PageKeys("import-export", "ie")
OPERATORS = PageKeys("operators", "op")

PAGES = (OVERVIEW, SIMULATOR, WHAT_IF, RECORDS, DECAY, SELECTOR, POLICIES, GRAPH, AUDIT, CURATE, REVIEW, CAPTURE,
         IMPORT_EXPORT, OPERATORS)

# The trust form reads the policy file's profiles (its presets) through a view of its own.
TRUST_FORM_VIEW = "trust-form"

_PREFIXES = [p.prefix + "_" for p in (*PAGES, WHAT_IF_A, WHAT_IF_B)]
assert not [(a, b) for a in _PREFIXES for b in _PREFIXES if a != b and b.startswith(a)], "two pages' keys can meet"
assert not [k for k in (SIGNED_IN, SESSION_TOKEN, SHARED_TRUST, POLICY_UPLOAD, SIGN_OUT) if k.startswith(tuple(_PREFIXES))]
