"""Observational Memory: observer and reflector compress a thread's history into observations."""
