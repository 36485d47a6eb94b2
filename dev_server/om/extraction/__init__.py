"""Extractors: named values pulled out by the observer or reflector, run and written with a cycle."""
