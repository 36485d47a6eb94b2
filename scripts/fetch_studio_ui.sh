#!/usr/bin/env bash
# Fetch the built Mastra Studio (dist/studio of the `mastra` CLI package) into DEST.
#
#   scripts/fetch_studio_ui.sh DEST        (make studio-ui uses DEST=<repo>/studio-ui)
#
# Only `npm pack mastra@VERSION` is downloaded (one tarball from the npm registry; no
# dependencies, no install scripts). Idempotent: when DEST/VERSION already names this
# version and DEST/index.html exists, nothing is fetched. The copy is staged next to DEST
# and swapped in, so an interrupted run never leaves a half-filled DEST.
# Any failure prints ONE line starting with "fetch_studio_ui:" and exits 1.
set -euo pipefail

MASTRA_VERSION="${MASTRA_STUDIO_VERSION:-1.31.0}"
MARKER="mastra@${MASTRA_VERSION}"

fail() { echo "fetch_studio_ui: $*" >&2; exit 1; }

[ $# -eq 1 ] && [ -n "$1" ] || fail "usage: scripts/fetch_studio_ui.sh DEST"
DEST="$1"

if [ -f "$DEST/index.html" ] && [ "$(cat "$DEST/VERSION" 2>/dev/null)" = "$MARKER" ]; then
    echo "fetch_studio_ui: $DEST already holds $MARKER"
    exit 0
fi

command -v npm >/dev/null 2>&1 || fail "npm not found (Node 20 + npm are needed to fetch the Studio build)"
command -v tar >/dev/null 2>&1 || fail "tar not found"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/studio-ui.XXXXXX")"
STAGE=""
cleanup() { rm -rf "$WORK"; [ -z "$STAGE" ] || rm -rf "$STAGE"; }
trap cleanup EXIT

if ! TARBALL="$(cd "$WORK" && npm pack "mastra@${MASTRA_VERSION}" --silent --no-audit --no-fund 2>"$WORK/npm.err" | tail -n 1)" \
        || [ ! -f "$WORK/$TARBALL" ]; then
    fail "npm pack mastra@${MASTRA_VERSION} failed: $(grep -m1 -i 'err' "$WORK/npm.err" || tail -n 1 "$WORK/npm.err")"
fi

tar -xzf "$WORK/$TARBALL" -C "$WORK" package/dist/studio 2>"$WORK/tar.err" \
    || fail "mastra@${MASTRA_VERSION} tarball has no package/dist/studio ($(head -n 1 "$WORK/tar.err"))"
[ -f "$WORK/package/dist/studio/index.html" ] || fail "mastra@${MASTRA_VERSION} package/dist/studio has no index.html"

mkdir -p "$(dirname "$DEST")" || fail "cannot create parent of $DEST"
STAGE="$(mktemp -d "$(dirname "$DEST")/.studio-ui-stage.XXXXXX")" || fail "cannot write next to $DEST"
cp -R "$WORK/package/dist/studio/." "$STAGE/" || fail "copy into $STAGE failed"
echo "$MARKER" > "$STAGE/VERSION"
chmod 755 "$STAGE"

rm -rf "$DEST" || fail "cannot remove old $DEST"
mv "$STAGE" "$DEST" || fail "cannot move build into $DEST"
STAGE=""
echo "fetch_studio_ui: installed $MARKER into $DEST ($(du -sh "$DEST" | cut -f1))"
