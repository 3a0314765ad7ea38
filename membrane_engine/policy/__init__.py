"""Policies as code (SPEC 11): checking a policy file against the store, and snapshots."""
