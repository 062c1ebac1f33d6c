# The gateway's image: Debian bookworm's python3 and this project in a venv at /opt/gateway.
#
#   compose/stack wheels && docker build -t pgw-gateway .
#   docker run --rm -p 6650:6650 -p 8080:8080 pgw-gateway --redis-url redis://REDIS:6379
#
# The target spark-pipeline, built with EXTRAS=[spark], is the Spark example pipeline
# (spark/examples/orders_pipeline.py) as a service: the same venv with PySpark, PyArrow,
# pandas and fastavro, and headless Java 17:
#
#   docker build --target spark-pipeline --build-arg EXTRAS=[spark] -t pgw-spark-pipeline .
#   docker run --rm --network host pgw-spark-pipeline --produce 1000 --once
#
# Python packages come from the wheelhouse that `compose/stack wheels` builds on the host
# (compose/.state/wheels: this project and every dependency, for CPython 3.11), so the build
# needs no access to PyPI; with `--build-arg PIP_FROM=pypi` they come from PyPI instead and
# the project from this source tree. Every option is also an environment variable
# (PULSAR_GATEWAY_REDIS_URL, PULSAR_GATEWAY_ADVERTISED_ADDRESS, ...: see --help). Without
# --redis-url the gateway starts its own AOF-persistent redis-server under
# /var/lib/pulsar-gateway/data (mount a volume there to keep it).

FROM debian:bookworm AS python
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/*

# -- install into a venv; the final image copies the venv only, without the wheelhouse -----
FROM python AS install
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/*
# where the wheels are, in the build context; "wheels" (only them) or "pypi"; the project's
# extras ("[spark]" for the pipeline)
ARG WHEELS=compose/.state/wheels
ARG PIP_FROM=wheels
ARG EXTRAS=""
COPY pyproject.toml README.md /src/
COPY pulsar_gateway /src/pulsar_gateway
COPY spark/pyspark_pulsar /src/spark/pyspark_pulsar
# the wildcard lets the build go on without a wheelhouse when PIP_FROM=pypi
COPY pyproject.toml ${WHEELS}* /wheels/
RUN set -eu; \
    python3 -m venv /opt/gateway; \
    case "$PIP_FROM" in \
      wheels) \
        ls /wheels/pulsar_redis_gateway-*.whl >/dev/null 2>&1 || { \
          echo "no wheelhouse in $WHEELS: run compose/stack wheels first," \
               "or build with --build-arg PIP_FROM=pypi" >&2; exit 1; }; \
        /opt/gateway/bin/pip install --no-cache-dir --no-index --find-links /wheels \
          "pulsar-redis-gateway$EXTRAS" ;; \
      pypi) \
        /opt/gateway/bin/pip install --no-cache-dir "/src$EXTRAS" ;; \
      *) echo "PIP_FROM must be wheels or pypi, not $PIP_FROM" >&2; exit 1 ;; \
    esac; \
    /opt/gateway/bin/pulsar-gateway --help >/dev/null

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
ENV PATH=/opt/gateway/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1
USER gateway
WORKDIR /var/lib/pulsar-gateway
# 6650: Pulsar binary protocol; 8080: admin REST, WebSocket, REST produce, /metrics
EXPOSE 6650 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=15s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; port = os.environ.get('PULSAR_GATEWAY_HTTP_PORT') or '8080'; urllib.request.urlopen(f'http://127.0.0.1:{port}/admin/v2/brokers/health', timeout=2)"]
ENTRYPOINT ["pulsar-gateway"]
