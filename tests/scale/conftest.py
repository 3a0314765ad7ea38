"""Scale tests: the fast paths (column cache, vectorized retrieval, bulk import) against the
naive reference in bench/reference.py, on generated stores, on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the bench package lives at the repository root
    sys.path.insert(0, str(ROOT))
