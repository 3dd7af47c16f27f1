# The memsync server: small, non-root, with a health check. See docs/operators.md.
#   docker build -t memsync .
#   docker run -p 8787:8787 -v memsync-data:/var/lib/memsync memsync
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY memsync_protocol memsync_protocol
COPY sync_server sync_server
COPY sync_client sync_client
COPY scanner scanner
# Wheels for memsync and every dependency, so the final image needs no compiler or cache.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server]"

FROM python:3.12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/memsync --create-home memsync
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "memsync[server]" \
    && rm -rf /wheels
USER memsync
WORKDIR /var/lib/memsync
# SQLite in the volume by default; docker-compose.yml sets PostgreSQL.
ENV MEMSYNC_DATABASE_URL=sqlite:////var/lib/memsync/memsync.sqlite3 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/memsync"]
EXPOSE 8787
# /readyz answers 200 only when the database does.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/readyz', timeout=2)"]
CMD ["memsync-server", "serve", "--host", "0.0.0.0", "--port", "8787"]
