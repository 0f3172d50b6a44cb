"""Shared pytest configuration: fixture plugins for the real servers the suite starts."""

pytest_plugins: list[str] = []
