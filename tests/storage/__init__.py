"""Tests of membrane_engine.storage."""
