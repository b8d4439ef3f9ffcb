"""Helpers shared by tests and benchmarks (fixture servers); not part of the product."""
