"""The console with an operator already signed in, for the browser tests of pages that show
content only to a signed-in operator (tests/e2e/test_graph.py): the session is seeded from
E2E_OPERATOR_CLEARANCE ("level" or "level:scope1,scope2") before console/app.py runs. Test
scaffolding only: the console itself is started from console/app.py."""

from __future__ import annotations

import os
import runpy
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from console import auth  # noqa: E402
from membrane_engine.operators import Operator  # noqa: E402

if auth.current() is None:
    level, _, scopes = os.environ.get("E2E_OPERATOR_CLEARANCE", "hyper").partition(":")
    auth.sign_in_session(Operator(name="e2e", role="viewer", max_sensitivity=level,
                                  scopes=[s for s in scopes.split(",") if s]),
                         datetime.now(timezone.utc) + timedelta(hours=2))

runpy.run_path(str(ROOT / "console" / "app.py"), run_name="__main__")
