"""Tests of membrane_engine.accounts."""
