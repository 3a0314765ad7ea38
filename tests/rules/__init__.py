"""Tests of membrane_engine.rules."""
