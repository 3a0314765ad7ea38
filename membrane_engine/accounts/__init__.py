"""Operators kept in the store: passwords, sessions and sign-in tokens (SPEC 10)."""
