# memoryos-actors in a container: `memoryos serve` (HTTP API, MCP at /mcp, memory page at
# /ui) on port 8080, its data directory in the volume /data. See docs/container.md.
#
#   docker build -t memoryos-actors .
#   docker run --rm -v memoryos-data:/data memoryos-actors keys add --tenant acme
#   docker run -d --name memoryos -p 127.0.0.1:8080:8080 -v memoryos-data:/data \
#       --stop-timeout 45 memoryos-actors
#
# Two stages: the first has a C++ compiler and builds every wheel (hnswlib is compiled from
# source where no wheel fits); the second installs those wheels, with no compiler and no
# network, and runs as a user without privileges.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
# hnswlib's build needs a C++ compiler and the Python headers (the image has the headers).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential=12.* \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# pyproject.toml reads README.md as the package's description.
COPY pyproject.toml README.md ./
COPY supervisor ./supervisor
COPY memoryos_actors ./memoryos_actors
# The wheels of memoryos-actors and of everything its server and MCP extras need.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server,mcp]"

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MEMORYOS_DATA_DIR=/data
RUN groupadd --system --gid 10001 memoryos \
    && useradd --system --uid 10001 --gid memoryos --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin memoryos \
    && mkdir /data \
    && chown memoryos:memoryos /data
# Installed from the first stage's wheels only (--no-index): nothing is compiled here.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels \
        "$(ls /wheels/memoryos_actors-*.whl)[server,mcp]"
USER 10001:10001
WORKDIR /data
# The data directory: users' memories, the API key file (server-keys.json), the lock.
VOLUME ["/data"]
EXPOSE 8080
# SIGTERM stops the server gracefully: requests in flight get up to 30 s, then the memory
# system is closed (give `docker stop` more than that: --stop-timeout 45).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["memoryos"]
# 0.0.0.0 inside the container, so the published port reaches it; every /v1 request needs
# an API key from /data/server-keys.json (`memoryos keys add --tenant NAME`).
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--mcp"]
