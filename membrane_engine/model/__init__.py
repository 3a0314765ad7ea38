"""The record model: records, enums, time and argument checks (no store, no rules)."""
