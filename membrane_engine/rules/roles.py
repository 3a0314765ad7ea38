"""The console's own people, SPEC 10: operators with a role and a clearance.

An operator is a person using the console, not an agent. Their clearance is a trust context
that the engine applies to them exactly as it gates an agent; their role says which writes
they may make. Every "may this operator do that?" is answered by ``permits`` here, and nowhere
else.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from membrane_engine.model.records import Sensitivity
from membrane_engine.rules.trust import TrustContext, scopes_tuple


class Role(str, Enum):
    VIEWER = "viewer"
    CURATOR = "curator"
    ADMIN = "admin"

    @property
    def level(self) -> int:
        return _ROLE_LEVELS[self]

    def __str__(self) -> str:
        return self.value


_ROLE_LEVELS = {Role.VIEWER: 0, Role.CURATOR: 1, Role.ADMIN: 2}

# The least role each console action needs (SPEC 10). Reads need a viewer; the curation
# operations of SPEC 6 a curator, except the ones that remove or bring back whole records.
ACTION_ROLES: dict[str, Role] = {
    "read": Role.VIEWER,
    **{op: Role.CURATOR for op in ("reinforce", "penalize", "retract", "contest", "supersede", "fork",
                                    "merge", "pin", "unpin", "reclassify", "reinstate")},
    **{op: Role.ADMIN for op in ("delete", "restore", "prune", "import", "manage_operators")},
}
ACTION_ROLES["restore_version"] = Role.CURATOR  # a version of a live record, as reclassify
# Using an uploaded policy file for the session (SPEC 11): its profiles drive the exposure
# previews of curation, and parsing it costs the shared server, so not a viewer's to do.
ACTION_ROLES["replace_policy"] = Role.CURATOR
# Writing as an agent would (SPEC 12): new records, and relations on existing ones, as curation does.
ACTION_ROLES["capture"] = Role.CURATOR
# Running Membrane's consolidators (SPEC 12): records created, reinforced and compressed, as
# curation does, over what the operator's clearance sees in full.
ACTION_ROLES["consolidate"] = Role.CURATOR
# Whether the console applies consolidation proposals without a review (consolidation.ledger).
ACTION_ROLES["configure_consolidation"] = Role.ADMIN


class Operator(BaseModel):
    """A signed-in person: name, role and clearance (max sensitivity and scopes)."""

    model_config = ConfigDict(frozen=True)

    name: str
    role: Role
    max_sensitivity: Sensitivity
    scopes: tuple[str, ...] = Field(default_factory=tuple)
    email: str | None = None

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes_as_tuple(cls, value: Any):
        return scopes_tuple(value)

    @property
    def actor(self) -> str:
        """The actor every write of this operator names in the audit log."""
        return f"operator:{self.name}"

    @property
    def clearance(self) -> TrustContext:
        """The trust context the console applies to this operator on every page."""
        return TrustContext(max_sensitivity=self.max_sensitivity, authenticated=True,
                            actor_id=self.actor, scopes=list(self.scopes))


def permits(operator: Operator | None, action: str) -> tuple[bool, str]:
    """May ``operator`` do ``action``? The answer and the reason, in words."""
    if operator is None:
        return False, "nobody is signed in"
    needed = ACTION_ROLES.get(action)
    if needed is None:
        return False, f"unknown action {action!r}"
    if operator.role.level >= needed.level:
        return True, f"{operator.role.value} may {action}"
    return False, f"{action} needs the {needed.value} role; {operator.name} is a {operator.role.value}"
