"""Membrane Console's tests, a package so that ``tests.support`` (the shared helpers) and each
folder's modules import by their full names."""
