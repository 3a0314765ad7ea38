"""Shared widgets of the console pages."""
