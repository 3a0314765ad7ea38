"""Tests of membrane_engine.policy."""
