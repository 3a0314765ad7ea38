"""Scale tests: the fast paths (column cache, vectorized retrieval, bulk import) against the
naive reference in bench/reference.py, on generated stores, on SQLite and PostgreSQL."""
