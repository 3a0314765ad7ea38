"""Consolidation (SPEC 12): Membrane's ``pkg/consolidation`` over this engine's store. Episodes
are compressed and turned into facts, skills and plans, linked to the entities they name.
``service.consolidate`` is the entry point; each consolidator is a module named as Membrane's
file (``episodic``, ``semantic``, ``competence``, ``plangraph``, ``entity_links``)."""
