"""Tests of membrane_engine.audit."""
