"""Tests of membrane_engine.oversight."""
