"""Tests of membrane_engine.model."""
