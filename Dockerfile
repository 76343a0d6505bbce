# hermes-gateway: a non-root image. No secret is baked in: pass tokens at run time
# (--env-file, -e) or put a .env (mode 0600) into the /data volume.
#   docker build -t hermes-gateway .
#   docker run -d --name hermes --stop-timeout 45 -v hermes-data:/data --env-file ./hermes.env hermes-gateway
# --stop-timeout must cover gateway.drain_timeout (20 s) + gateway.disconnect_timeout (10 s) + 15 s for
# the writer to drain and checkpoint state.db, so `docker stop` never kills it mid-way.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HERMES_HOME=/data

RUN groupadd --gid 10000 hermes \
    && useradd --uid 10000 --gid 10000 --home-dir /data --no-create-home --shell /usr/sbin/nologin hermes \
    && mkdir -p /data \
    && chown 10000:10000 /data \
    && chmod 0700 /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY adapters ./adapters
COPY core ./core
COPY storage ./storage
RUN pip install --no-cache-dir /app

USER 10000:10000
VOLUME ["/data"]
# The HTTP API (OpenAI-compatible) and /healthz /readyz /metrics. It listens on loopback inside the
# container unless API_SERVER_HOST=0.0.0.0 is given, which also requires API_SERVER_KEY (else exit 78).
EXPOSE 8642

# Liveness only (/healthz is 200 while the event loop answers, whatever the platforms do; readiness is
# /readyz). It reads the port from API_SERVER_PORT alone: set the port through that variable, not only in
# config.yaml, and keep API_SERVER_HOST loopback or 0.0.0.0 so 127.0.0.1 reaches it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os,sys,urllib.request as u; p=os.environ.get('API_SERVER_PORT','8642'); sys.exit(0 if u.urlopen(f'http://127.0.0.1:{p}/healthz', timeout=4).status == 200 else 1)"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["hermes-gateway"]
CMD ["run"]
