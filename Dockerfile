# The gateway's image: Debian bookworm's python3 and this project in a venv at /opt/gateway.
#
#   docker build -t pgw-gateway .
#   docker run --rm -p 6650:6650 -p 8080:8080 pgw-gateway --redis-url redis://REDIS:6379
#
# The target spark-pipeline, built with EXTRAS=[spark], is the Spark example pipeline
# (spark/examples/orders_pipeline.py) as a service: the same venv with PySpark, PyArrow,
# pandas and fastavro, and headless Java 17:
#
#   docker build --target spark-pipeline --build-arg EXTRAS=[spark] -t pgw-spark-pipeline .
#   docker run --rm --network host pgw-spark-pipeline --produce 1000 --once
#
# Python packages come, by default (PIP_FROM=auto), from the wheelhouse compose/wheels when
# it holds this project's wheel, else from PyPI. `compose/stack wheels` fills it on the host
# (this project and every dependency, for CPython 3.11), so the build then needs no access
# to PyPI; until then the directory holds only its .gitignore, which keeps it in every clone.
# `--build-arg PIP_FROM=wheels` insists on the wheelhouse (the build stops at once without
# it) and `--build-arg PIP_FROM=pypi` takes everything from PyPI, the project from this
# source tree, compiled with mypyc in the install stage (gcc and the Python headers there,
# not in the final image; `--build-arg PULSAR_GATEWAY_COMPILE=0` for pure Python). The
# wheelhouse's project wheel is the compiled build when the host could make it
# (compose/stack). Either way the base image debian:bookworm must be there or pullable
# (`compose/stack base` builds it where no registry answers). Every option is also an
# environment variable (PULSAR_GATEWAY_REDIS_URL, PULSAR_GATEWAY_ADVERTISED_ADDRESS, ...:
# see --help). Without --redis-url the gateway starts its own AOF-persistent redis-server
# under /var/lib/pulsar-gateway/data (mount a volume there to keep it).

# -- where the Python packages come from ---------------------------------------------------
# A stage of its own that needs nothing but the base image, so that PIP_FROM=wheels without
# a wheelhouse stops the build at once, not after the apt-get installs of the others.
FROM debian:bookworm AS pip-source
# where the wheels are, in the build context (compose/stack writes them there); "auto"
# (the wheelhouse when it holds this project's wheel, else PyPI), "wheels" or "pypi"
ARG WHEELS=compose/wheels
ARG PIP_FROM=auto
# pyproject.toml is always there, so the COPY holds when the wildcard matches no wheel
COPY pyproject.toml ${WHEELS}/pulsar_redis_gateway-*.whl /probe/
RUN set -eu; \
    found=""; \
    if ls /probe/pulsar_redis_gateway-*.whl >/dev/null 2>&1; then found=yes; fi; \
    case "$PIP_FROM" in \
      auto) if [ -n "$found" ]; then from=wheels; else from=pypi; fi ;; \
      wheels) \
        [ -n "$found" ] || { \
          echo "PIP_FROM=wheels, but the wheelhouse $WHEELS holds no pulsar_redis_gateway" \
               "wheel: run compose/stack wheels first, or build with" \
               "--build-arg PIP_FROM=auto (or pypi)" >&2; exit 1; }; \
        from=wheels ;; \
      pypi) from=pypi ;; \
      *) echo "PIP_FROM must be auto, wheels or pypi, not $PIP_FROM" >&2; exit 1 ;; \
    esac; \
    echo "$from" >/pip-from; \
    if [ "$from" = wheels ]; then \
      echo "PIP_FROM=$PIP_FROM: Python packages from the wheelhouse $WHEELS"; \
    else \
      echo "PIP_FROM=$PIP_FROM: Python packages from PyPI, the project from the source"; \
    fi

FROM debian:bookworm AS python
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/*

# -- install into a venv; the final image copies the venv only, without the wheelhouse -----
FROM python AS install
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/*
# the wheelhouse's path (as in pip-source) and the project's extras ("[spark]" for the
# pipeline)
ARG WHEELS=compose/wheels
ARG EXTRAS=""
# PIP_FROM=pypi: 1 compiles the per-message modules (setup.py fetches mypy), 0 does not
ARG PULSAR_GATEWAY_COMPILE=1
COPY pyproject.toml setup.py README.md /src/
COPY pulsar_gateway /src/pulsar_gateway
COPY spark/pyspark_pulsar /src/spark/pyspark_pulsar
COPY --from=pip-source /pip-from /pip-from
# the directory is tracked (its .gitignore), so this COPY holds in a fresh clone
COPY ${WHEELS}/ /wheels/
RUN set -eu; \
    python3 -m venv /opt/gateway; \
    case "$(cat /pip-from)" in \
      wheels) \
        echo "installing pulsar-redis-gateway$EXTRAS from the wheelhouse $WHEELS"; \
        /opt/gateway/bin/pip install --no-cache-dir --no-index --find-links /wheels \
          "pulsar-redis-gateway$EXTRAS" ;; \
      pypi) \
        echo "installing /src$EXTRAS and its dependencies from PyPI" \
             "(PULSAR_GATEWAY_COMPILE=$PULSAR_GATEWAY_COMPILE)"; \
        if [ "$PULSAR_GATEWAY_COMPILE" != 0 ]; then \
          apt-get update; \
          DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            gcc libc6-dev python3-dev; \
        fi; \
        PULSAR_GATEWAY_COMPILE=$PULSAR_GATEWAY_COMPILE \
          /opt/gateway/bin/pip install --no-cache-dir "/src$EXTRAS" ;; \
    esac; \
    /opt/gateway/bin/pulsar-gateway --version

# -- the Spark example pipeline (--target spark-pipeline, EXTRAS=[spark]) ------------------
# Arguments are the example's (--service-url, --admin-url, --topic, --totals-topic,
# --output, --produce N, --once, --master); by default it publishes 1000 sample orders, then
# runs the streaming queries every 5 seconds, writing Parquet under /output (a volume).
FROM python AS spark-pipeline
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=install /opt/gateway /opt/gateway
RUN /opt/gateway/bin/python -c "import pyspark, pyspark_pulsar"
COPY spark/examples/orders_pipeline.py /app/orders_pipeline.py
RUN useradd --user-group --uid 10001 --no-log-init --create-home --shell /usr/sbin/nologin \
      spark \
    && mkdir -p /output && chown spark:spark /output
ENV PATH=/opt/gateway/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=/opt/gateway/bin/python
USER spark
WORKDIR /home/spark
# healthy once the Spark session is up (its UI's REST API answers)
HEALTHCHECK --interval=5s --timeout=3s --start-period=120s --retries=3 \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4040/api/v1/applications', timeout=2)"]
ENTRYPOINT ["python3", "/app/orders_pipeline.py"]
CMD ["--service-url", "pulsar://localhost:6650", "--admin-url", "http://localhost:8080", \
     "--output", "/output", "--produce", "1000"]

# -- the gateway (the default target) ----------------------------------------------------
FROM python AS gateway
COPY --from=install /opt/gateway /opt/gateway
RUN useradd --user-group --uid 10001 --no-log-init --home-dir /var/lib/pulsar-gateway \
      --create-home --shell /usr/sbin/nologin gateway
# one worker process per CPU the container may use (pulsar-gateway --workers)
ENV PATH=/opt/gateway/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PULSAR_GATEWAY_WORKERS=auto
USER gateway
WORKDIR /var/lib/pulsar-gateway
# 6650: Pulsar binary protocol; 8080: admin REST, WebSocket, REST produce, /metrics
EXPOSE 6650 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=15s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; port = os.environ.get('PULSAR_GATEWAY_HTTP_PORT') or '8080'; urllib.request.urlopen(f'http://127.0.0.1:{port}/admin/v2/brokers/health', timeout=2)"]
ENTRYPOINT ["pulsar-gateway"]
