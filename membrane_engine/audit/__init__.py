"""The audit trail: appending, reading and verifying the hash chains (SPEC 6)."""
