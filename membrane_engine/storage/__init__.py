"""Storage: how records, audit entries and operators are kept, apart from the rules that use them.

- ``store``: tables, migrations and every transaction, on SQLite and PostgreSQL;
- ``libpq``, ``probe``: PostgreSQL's fast paths (prepared reads, the change probe);
- ``columns``: the numpy column cache that retrieval, gating and salience read;
- ``import_writer``, ``json_items``, ``jsonl_import``: bulk import (written in parts in one
  transaction; a ``.json`` array streamed; a ``.jsonl`` file validated on worker processes).

The domain's rules (schema, salience, trust, retrieval, selector, curation, audit) live one
level up and reach the database only through here.
"""
