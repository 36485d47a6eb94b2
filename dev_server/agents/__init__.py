"""Agents as plain configuration: the built-in ones (one definition file each, listed in
``registry.DEFINITIONS``), or the user's own (``loading``)."""
