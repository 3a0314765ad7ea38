"""Helpers shared by the test folders: record factories, stores, sessions, browser machinery and
the scripts the tests start as processes of their own (``python -m tests.support.NAME``)."""
