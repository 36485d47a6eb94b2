"""The user's own agents: ``--agents`` / ``DEV_SERVER_AGENTS``, loaded and checked at start.

The source is an import string, as uvicorn takes one (``mypkg.agents``, or
``mypkg.agents:name``; the current directory is searched first), or the path of a ``.py``
file (its directory is searched for the modules it imports). Without ``:name`` the agents
are the module's ``agents`` (a list of ``dev_server.Agent``) when it has one, else every
``Agent`` at its top level, in order; with it, that attribute (an agent or a list of them).

Every way this can go wrong is an ``AgentsError`` of one line naming the source: a module
or file that is not there, a module that raises while it is imported (its own error, with
the line of the user's file it came from: a bad option of ``Memory``, ``Agent`` or
``tool`` is raised where it is written), something that is not an agent, no agents at
all, or two with one id. The command line prints it and exits 2.

A file is imported under a name of its own (``dev_server_agents_<stem>_<hash>``), so two
files of one name never meet (a ``cpu_bound`` tool's child process loads it by its path:
``dev_server.agents.tool_decorator``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from dev_server.agents.definition import AgentDefinition
from dev_server.agents.registry import DEFINITIONS
from dev_server.agents.tool_decorator import FILE_MODULE_PREFIX


class AgentsError(Exception):
    """The agents could not be loaded; the message is one line."""


def agents_for(source: str | None) -> tuple[AgentDefinition, ...]:
    """The agents of ``source`` (the ``agents`` setting), or the built-in ones without it."""
    return load_agents(source) if source else DEFINITIONS


def load_agents(source: str) -> tuple[AgentDefinition, ...]:
    """The agents ``source`` defines, checked (see the module docstring)."""
    where = f"agents {source!r}"
    is_file = source.endswith(".py") or os.sep in source or "/" in source
    target, _, attribute = (source, "", "") if is_file else source.partition(":")
    module = _import_file(Path(target), where) if is_file else _import_module(target, where)
    if attribute:
        if not hasattr(module, attribute):
            raise AgentsError(f"{where}: module {module.__name__!r} has no attribute {attribute!r}")
        found: Any = getattr(module, attribute)
        label = attribute
    elif hasattr(module, "agents"):
        found, label = module.agents, "agents"
    else:
        found = [value for value in vars(module).values() if isinstance(value, AgentDefinition)]
        label = "the module"
        if not found:
            raise AgentsError(f"{where}: defines no agent (give it `agents = [Agent(...), ...]`, or Agent objects "
                              "at its top level)")
    return _checked(found, label, where)


def _checked(found: Any, label: str, where: str) -> tuple[AgentDefinition, ...]:
    if isinstance(found, AgentDefinition):
        agents: tuple[Any, ...] = (found,)
    elif isinstance(found, Iterable) and not isinstance(found, (str, bytes, dict)):
        agents = tuple(found)
    else:
        raise AgentsError(f"{where}: {label} is a {type(found).__name__}, not an Agent or a list of them")
    if not agents:
        raise AgentsError(f"{where}: {label} is empty")
    seen: set[str] = set()
    for index, agent in enumerate(agents):
        if not isinstance(agent, AgentDefinition):
            raise AgentsError(f"{where}: {label}[{index}] is a {type(agent).__name__}, not a dev_server.Agent")
        if agent.id in seen:
            raise AgentsError(f"{where}: agent id {agent.id!r} is defined twice")
        seen.add(agent.id)
    return agents


def _import_module(name: str, where: str) -> ModuleType:
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise AgentsError(f"{where}: not an import string (module.path or module.path:name) nor a .py file")
    cwd = os.getcwd()
    if cwd not in sys.path:  # as uvicorn does: the current directory's modules first
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise AgentsError(f"{where}: no module named {exc.name!r} (from {cwd})") from None
        raise AgentsError(f"{where}: {_raised(exc)}") from None
    except Exception as exc:
        raise AgentsError(f"{where}: {_raised(exc)}") from None


def _import_file(path: Path, where: str) -> ModuleType:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise AgentsError(f"{where}: no such file {str(path)!r}")
    if path.suffix != ".py":
        raise AgentsError(f"{where}: {str(path)!r} is not a .py file")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"{FILE_MODULE_PREFIX}{''.join(c if c.isalnum() else '_' for c in path.stem)}_{digest}"
    if name in sys.modules:  # loaded once per process (the command line checks it before the app loads it)
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentsError(f"{where}: cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:  # its sibling modules import as they would run as a script
        sys.path.insert(0, folder)
    sys.modules[name] = module  # pydantic and dataclasses look their module up while it runs
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise AgentsError(f"{where}: {_raised(exc)}") from None
    return module


def _raised(exc: Exception) -> str:
    """``exc`` in one line, with the last line of the user's code it came through."""
    line, message = None, str(exc)
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        line, message = f"{Path(exc.filename).name}:{exc.lineno}", exc.msg
    else:
        for frame in traceback.extract_tb(exc.__traceback__):
            if _users(frame.filename):
                line = f"{Path(frame.filename).name}:{frame.lineno}"
    message = " ".join(message.split()) or type(exc).__name__
    return f"{type(exc).__name__}: {message}" + (f" (at {line})" if line else "")


_PACKAGE = Path(__file__).resolve().parents[1]
_INSTALLED = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}


def _users(filename: str) -> bool:
    """Whether a traceback frame's file is the user's: not generated code, not this package,
    not the Python installation (the standard library, site-packages)."""
    if filename.startswith("<"):
        return False
    parents = Path(filename).resolve().parents
    return _PACKAGE not in parents and not any(prefix in parents for prefix in _INSTALLED)
