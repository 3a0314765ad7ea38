"""How an agent writes (SPEC 12): capture, after Membrane 8408c8c ``pkg/ingestion``.

``models``: the request, the response and Membrane's interpretation shape; ``interpret``: the
fallback interpretation and the value helpers it is made of (pure); ``capture``: candidate
records, entity resolution, edges, the derived fact and the one transaction that writes them.
"""
