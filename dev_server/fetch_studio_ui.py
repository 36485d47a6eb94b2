"""Fetch the real Mastra Studio web app (``dist/studio`` of the pinned ``mastra`` npm package).

    dev-server studio-ui [--dest DIR]             what a user runs (wheel or checkout)
    python3 dev_server/fetch_studio_ui.py DEST    make studio-ui and the image's build stage

Only ``npm pack mastra@VERSION`` is run: one tarball from the npm registry, no
dependencies, no install scripts; Node 20 and npm must be on PATH. From the tarball only the
regular files under ``package/dist/studio/`` are written (no links, nothing outside the
destination). Idempotent: when DEST/VERSION names this package and DEST/index.html exists,
nothing is fetched. The copy is staged next to DEST and swapped in, so an interrupted run
never leaves a half-filled DEST. It says what it fetches, from where, before it does
(``say``: ``make dev`` shows it), and any failure is one line (``FetchError``) with npm's own
reason (a refused connection, a name that does not resolve, a version that does not exist).
npm retries once, soon: offline, the fetch fails in seconds rather than after minutes.

Standard library only, and nothing of ``dev_server`` imported: the image's build stage runs
this file with Debian's python3 next to npm, before the package is installed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

MASTRA_VERSION = "1.31.0"  # the Studio the REST API and the browser tests are checked against
PACKAGE = f"mastra@{MASTRA_VERSION}"
BUILD_PREFIX = "package/dist/studio/"
INDEX = "index.html"
MARKER = "VERSION"
NPM_TIMEOUT_S = 600


class FetchError(Exception):
    """The Studio build could not be fetched; the message is one line saying why."""


def fetch(dest: Path, package: str = PACKAGE, say: Callable[[str], None] = lambda line: None) -> str:
    """Put the Studio build of ``package`` (an npm spec: ``mastra@1.31.0``, or a local
    folder or tarball) into ``dest``; one line saying what was done. ``say`` is told, before
    npm runs, what is fetched from where."""
    try:
        dest = dest.expanduser().resolve()  # through a link: the directory it names is the one served
    except (OSError, RuntimeError) as exc:  # a link loop
        raise FetchError(f"cannot resolve {dest}: {exc}") from None
    if (dest / INDEX).is_file() and _marker(dest) == package:
        return f"{dest} already holds {package}"
    npm = shutil.which("npm")
    if npm is None:
        raise FetchError("npm not found: Node 20 and npm fetch the Studio web app (https://nodejs.org/); "
                         "or set DEV_SERVER_STUDIO_UI_DIR to a Studio build")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot create {dest.parent}: {exc.strerror or exc}") from None
    source = "" if Path(package).exists() else f" from {_registry(npm)}"  # a local folder or tarball
    say(f"fetching the Studio web app: npm pack {package}{source} into {dest} ...")
    with tempfile.TemporaryDirectory(prefix="studio-ui-pack.") as work:
        tarball = _pack(npm, package, Path(work))
        stage = Path(tempfile.mkdtemp(prefix=".studio-ui-stage.", dir=dest.parent))
        try:
            files = _extract(tarball, stage, package)
            (stage / MARKER).write_text(package + "\n", encoding="utf-8")
            _swap(stage, dest)
        except OSError as exc:
            shutil.rmtree(stage, ignore_errors=True)
            raise FetchError(f"cannot write the Studio build into {dest}: {exc.strerror or exc}") from None
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    return f"installed {package} into {dest} ({files} files)"


def _marker(directory: Path) -> str | None:
    try:
        return (directory / MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _registry(npm: str) -> str:
    try:
        found = subprocess.run([npm, "config", "get", "registry"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "the npm registry"
    return found.stdout.strip() or "the npm registry"


def _pack(npm: str, package: str, work: Path) -> Path:
    try:  # --loglevel=error, not --silent: the error lines are npm's reason
        result = subprocess.run([npm, "pack", package, "--loglevel=error", "--no-audit", "--no-fund",
                                 "--fetch-retries=1", "--fetch-retry-mintimeout=2000", "--fetch-timeout=30000"],
                                cwd=work, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FetchError(f"npm pack {package} did not finish within {NPM_TIMEOUT_S} s") from None
    tarballs = sorted(work.glob("*.tgz"))
    if result.returncode != 0 or len(tarballs) != 1:
        raise FetchError(f"npm pack {package} failed{_npm_reason(result.stderr)} (offline? behind a proxy?"
                         " see npm config get registry)")
    return tarballs[0]


def _npm_reason(stderr: str) -> str:
    """npm's error code and its first line that says why (not its syscall, errno, log path or stack)."""
    errors = [line.removeprefix("npm error ").strip() for line in stderr.splitlines() if line.startswith("npm error")]
    code = next((line.removeprefix("code ") for line in errors if line.startswith("code ")), None)
    why = next((line for line in errors if not re.match(r"(code|syscall|errno) |A complete log|at ", line)), None)
    if why is None:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else "no tarball"
    return f"{f' ({code})' if code else ''}: {why}"


def _extract(tarball: Path, stage: Path, package: str) -> int:
    """The regular files under ``package/dist/studio/`` into ``stage``; how many."""
    files = 0
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            for member in archive:
                if not member.isfile() or not member.name.startswith(BUILD_PREFIX):
                    continue
                relative = PurePosixPath(member.name[len(BUILD_PREFIX):])
                if not relative.parts or relative.is_absolute() or ".." in relative.parts:
                    continue
                target = stage.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                if source is None:
                    continue
                with source, target.open("wb") as out:
                    shutil.copyfileobj(source, out)
                files += 1
    except (tarfile.TarError, EOFError) as exc:
        raise FetchError(f"the tarball of {package} is unreadable: {exc}") from None
    if not (stage / INDEX).is_file():
        raise FetchError(f"{package} has no {BUILD_PREFIX}{INDEX}")
    return files


def _swap(stage: Path, dest: Path) -> None:
    """Replace ``dest`` by ``stage`` (renames within one directory)."""
    stage.chmod(0o755)
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=".studio-ui-old.", dir=dest.parent))
        old.rmdir()
        dest.rename(old)
    stage.rename(dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch the Mastra Studio web app into DEST (npm pack).")
    parser.add_argument("dest", type=Path)
    parser.add_argument("--package", default=PACKAGE, help=f"the npm package to take dist/studio from ({PACKAGE})")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"fetch_studio_ui: {line}", flush=True)

    try:
        say(fetch(args.dest, args.package, say=say))
    except FetchError as exc:
        print(f"fetch_studio_ui: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
