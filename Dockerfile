# hermes-gateway: non-root image. Secrets are never baked in: pass them at run
# time (-e or --env-file), or put a .env in the /data volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HERMES_HOME=/data \
    API_SERVER_HOST=0.0.0.0

RUN groupadd --gid 10000 hermes \
    && useradd --uid 10000 --gid 10000 --home-dir /data --no-create-home --shell /usr/sbin/nologin hermes \
    && mkdir -p /data && chown hermes:hermes /data && chmod 0700 /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY adapters ./adapters
COPY core ./core
COPY storage ./storage
RUN pip install --no-cache-dir .

USER 10000:10000
VOLUME ["/data"]
EXPOSE 8642

# Listening beyond loopback requires API_SERVER_KEY; without it the daemon exits 78.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8642/healthz', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["hermes-gateway"]
CMD ["run"]
