"""Retrieval: layered retrieval with the selector (SPEC 4) and graph retrieval (SPEC 9)."""
