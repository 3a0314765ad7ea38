"""Tests of membrane_engine.transfer."""
