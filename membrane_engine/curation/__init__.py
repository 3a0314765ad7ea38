"""Curation (SPEC 6): revision operations, bulk operations and the review queue."""
