"""Agents as plain configuration: one definition file each, listed in ``registry.DEFINITIONS``."""
