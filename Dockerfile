# dev-server: one image for both processes (`gateway`, the default, or `studio`).
#
#   docker build -t dev-server .
#   docker compose up          (both processes, one data volume; see docker-compose.yml)
#
# Stage 1 fetches the real Mastra Studio build with the same script as `make studio-ui`
# (`npm pack` of the pinned `mastra` package; no dependencies, no install scripts).
FROM node:20-bookworm-slim AS studio-ui
WORKDIR /build
COPY scripts/fetch_studio_ui.sh scripts/fetch_studio_ui.sh
RUN scripts/fetch_studio_ui.sh /build/studio-ui

# Stage 2 builds the wheel (it carries the SQL migrations inside the package).
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# The runtime: the installed wheel, the Studio build, a non-root user, data in /data.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 --user-group app \
    && mkdir /data && chown app:app /data
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
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
# Healthy once /health says "ok" (the models have warmed up); the studio service of
# docker-compose.yml probes its own role instead.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "app", "health", "gateway"]
ENTRYPOINT ["python", "-m", "app"]
CMD ["gateway"]
