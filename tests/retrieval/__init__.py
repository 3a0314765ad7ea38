"""Tests of membrane_engine.retrieval."""
