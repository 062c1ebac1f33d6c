"""GatewayConfig and parse_config: defaults, flags, environment, precedence, validation."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pulsar_gateway import build_info
from pulsar_gateway.server.config import (
    ENV_PREFIX,
    GatewayConfig,
    available_cpus,
    build_parser,
    parse_config,
)

# Every option: (field, flag, environment variable, a valid raw value, its parsed value).
OPTIONS = [
    ("port", "--port", "PULSAR_GATEWAY_PORT", "6651", 6651),
    ("http_port", "--http-port", "PULSAR_GATEWAY_HTTP_PORT", "8081", 8081),
    ("workers", "--workers", "PULSAR_GATEWAY_WORKERS", "3", 3),
    ("bind", "--bind", "PULSAR_GATEWAY_BIND", "127.0.0.2", "127.0.0.2"),
    (
        "advertised_address",
        "--advertised-address",
        "PULSAR_GATEWAY_ADVERTISED_ADDRESS",
        "gw.example",
        "gw.example",
    ),
    (
        "redis_url",
        "--redis-url",
        "PULSAR_GATEWAY_REDIS_URL",
        "redis://r:6379/0",
        "redis://r:6379/0",
    ),
    ("data_dir", "--data-dir", "PULSAR_GATEWAY_DATA_DIR", "/var/lib/pgw", "/var/lib/pgw"),
    ("log_level", "--log-level", "PULSAR_GATEWAY_LOG_LEVEL", "warning", "WARNING"),
    ("key_prefix", "--key-prefix", "PULSAR_GATEWAY_KEY_PREFIX", "t1", "t1"),
    ("cluster_name", "--cluster-name", "PULSAR_GATEWAY_CLUSTER_NAME", "east", "east"),
    (
        "max_message_size",
        "--max-message-size",
        "PULSAR_GATEWAY_MAX_MESSAGE_SIZE",
        "1048576",
        1048576,
    ),
    (
        "keepalive_seconds",
        "--keepalive-seconds",
        "PULSAR_GATEWAY_KEEPALIVE_SECONDS",
        "2.5",
        2.5,
    ),
    (
        "consumer_lease_seconds",
        "--consumer-lease-seconds",
        "PULSAR_GATEWAY_CONSUMER_LEASE_SECONDS",
        "3",
        3.0,
    ),
    (
        "default_retention_minutes",
        "--default-retention-minutes",
        "PULSAR_GATEWAY_DEFAULT_RETENTION_MINUTES",
        "-1",
        -1,
    ),
    (
        "default_retention_mb",
        "--default-retention-mb",
        "PULSAR_GATEWAY_DEFAULT_RETENTION_MB",
        "100",
        100,
    ),
    (
        "default_message_ttl_seconds",
        "--default-message-ttl-seconds",
        "PULSAR_GATEWAY_DEFAULT_MESSAGE_TTL_SECONDS",
        "3600",
        3600,
    ),
    (
        "topic_maintenance_interval_seconds",
        "--topic-maintenance-interval-seconds",
        "PULSAR_GATEWAY_TOPIC_MAINTENANCE_INTERVAL_SECONDS",
        "0.5",
        0.5,
    ),
    (
        "backlog_quota_check_enabled",
        "--backlog-quota-check-enabled",
        "PULSAR_GATEWAY_BACKLOG_QUOTA_CHECK_ENABLED",
        "false",
        False,
    ),
    (
        "backlog_quota_check_interval_seconds",
        "--backlog-quota-check-interval-seconds",
        "PULSAR_GATEWAY_BACKLOG_QUOTA_CHECK_INTERVAL_SECONDS",
        "0.25",
        0.25,
    ),
    (
        "redis_fsync",
        "--redis-fsync",
        "PULSAR_GATEWAY_REDIS_FSYNC",
        "always",
        "always",
    ),
    (
        "redis_replica_acks",
        "--redis-replica-acks",
        "PULSAR_GATEWAY_REDIS_REPLICA_ACKS",
        "1",
        1,
    ),
    (
        "redis_replica_ack_timeout_ms",
        "--redis-replica-ack-timeout-ms",
        "PULSAR_GATEWAY_REDIS_REPLICA_ACK_TIMEOUT_MS",
        "250",
        250,
    ),
    (
        "delayed_delivery_enabled",
        "--delayed-delivery-enabled",
        "PULSAR_GATEWAY_DELAYED_DELIVERY_ENABLED",
        "false",
        False,
    ),
    (
        "delayed_delivery_max_delay_ms",
        "--delayed-delivery-max-delay-ms",
        "PULSAR_GATEWAY_DELAYED_DELIVERY_MAX_DELAY_MS",
        "60000",
        60000,
    ),
]
_LIMIT_OPTIONS = [
    ("max_pending_publish_requests_per_connection", "200", 200),
    ("max_message_publish_buffer_size_in_mb", "-1", -1),
    ("pulsar_channel_write_buffer_high_water_mark", "131072", 131072),
    ("pulsar_channel_write_buffer_low_water_mark", "0", 0),
    ("pulsar_channel_pause_receiving_requests_if_unwritable", "false", False),
    ("broker_max_connections", "100", 100),
    ("broker_max_connections_per_ip", "10", 10),
    ("allow_auto_topic_creation", "false", False),
    ("allow_auto_topic_creation_type", "partitioned", "partitioned"),
    ("default_num_partitions", "4", 4),
    ("max_topics_per_namespace", "100", 100),
    ("max_concurrent_lookup_request", "5", 5),
    ("max_unacked_messages_per_consumer", "0", 0),
    ("max_unacked_messages_per_subscription", "1000", 1000),
    ("http_max_request_size", "1048576", 1048576),
]
OPTIONS += [
    (field, "--" + field.replace("_", "-"), "PULSAR_GATEWAY_" + field.upper(), raw, value)
    for field, raw, value in _LIMIT_OPTIONS
]

OPTION_IDS = [option[0] for option in OPTIONS]

# Invalid raw values: (flag, environment variable, raw value, text expected in the error).
INVALID = [
    ("--port", "PULSAR_GATEWAY_PORT", "-1", "0..65535"),
    ("--port", "PULSAR_GATEWAY_PORT", "65536", "0..65535"),
    ("--port", "PULSAR_GATEWAY_PORT", "http", "expected an integer"),
    ("--http-port", "PULSAR_GATEWAY_HTTP_PORT", "99999", "0..65535"),
    ("--http-port", "PULSAR_GATEWAY_HTTP_PORT", "1.5", "expected an integer"),
    ("--bind", "PULSAR_GATEWAY_BIND", "a b", "whitespace"),
    ("--advertised-address", "PULSAR_GATEWAY_ADVERTISED_ADDRESS", "a b", "whitespace"),
    ("--redis-url", "PULSAR_GATEWAY_REDIS_URL", "http://r:6379", "redis://"),
    ("--redis-url", "PULSAR_GATEWAY_REDIS_URL", "localhost:6379", "unix://"),
    ("--redis-url", "PULSAR_GATEWAY_REDIS_URL", "REDIS://r", "redis://"),
    ("--data-dir", "PULSAR_GATEWAY_DATA_DIR", "  ", "non-empty"),
    ("--redis-replica-acks", "PULSAR_GATEWAY_REDIS_REPLICA_ACKS", "-1", "number of replicas"),
    ("--redis-replica-acks", "PULSAR_GATEWAY_REDIS_REPLICA_ACKS", "x", "expected an integer"),
    (
        "--redis-replica-ack-timeout-ms",
        "PULSAR_GATEWAY_REDIS_REPLICA_ACK_TIMEOUT_MS",
        "0",
        "positive integer",
    ),
    ("--log-level", "PULSAR_GATEWAY_LOG_LEVEL", "verbose", "DEBUG, INFO"),
    ("--key-prefix", "PULSAR_GATEWAY_KEY_PREFIX", "a b", "whitespace"),
    ("--cluster-name", "PULSAR_GATEWAY_CLUSTER_NAME", "  ", "non-empty"),
    ("--max-message-size", "PULSAR_GATEWAY_MAX_MESSAGE_SIZE", "0", "positive"),
    ("--max-message-size", "PULSAR_GATEWAY_MAX_MESSAGE_SIZE", "-5", "positive"),
    ("--max-message-size", "PULSAR_GATEWAY_MAX_MESSAGE_SIZE", "2147483648", "32-bit"),
    ("--max-message-size", "PULSAR_GATEWAY_MAX_MESSAGE_SIZE", "5MB", "expected an integer"),
    ("--keepalive-seconds", "PULSAR_GATEWAY_KEEPALIVE_SECONDS", "0", "positive"),
    ("--keepalive-seconds", "PULSAR_GATEWAY_KEEPALIVE_SECONDS", "-1", "positive"),
    ("--keepalive-seconds", "PULSAR_GATEWAY_KEEPALIVE_SECONDS", "nan", "finite"),
    ("--keepalive-seconds", "PULSAR_GATEWAY_KEEPALIVE_SECONDS", "inf", "finite"),
    ("--keepalive-seconds", "PULSAR_GATEWAY_KEEPALIVE_SECONDS", "soon", "expected a number"),
    ("--consumer-lease-seconds", "PULSAR_GATEWAY_CONSUMER_LEASE_SECONDS", "0", "positive"),
    ("--default-retention-minutes", "PULSAR_GATEWAY_DEFAULT_RETENTION_MINUTES", "-2", "-1"),
    ("--default-retention-mb", "PULSAR_GATEWAY_DEFAULT_RETENTION_MB", "1.5", "an integer"),
    ("--default-message-ttl-seconds", "PULSAR_GATEWAY_DEFAULT_MESSAGE_TTL_SECONDS", "-1", "0"),
    (
        "--topic-maintenance-interval-seconds",
        "PULSAR_GATEWAY_TOPIC_MAINTENANCE_INTERVAL_SECONDS",
        "0",
        "positive",
    ),
    (
        "--backlog-quota-check-interval-seconds",
        "PULSAR_GATEWAY_BACKLOG_QUOTA_CHECK_INTERVAL_SECONDS",
        "0",
        "positive",
    ),
    ("--backlog-quota-check-enabled", "PULSAR_GATEWAY_BACKLOG_QUOTA_CHECK_ENABLED", "x", "true"),
    ("--redis-fsync", "PULSAR_GATEWAY_REDIS_FSYNC", "no", "everysec or always"),
    ("--delayed-delivery-enabled", "PULSAR_GATEWAY_DELAYED_DELIVERY_ENABLED", "maybe", "true"),
    (
        "--delayed-delivery-max-delay-ms",
        "PULSAR_GATEWAY_DELAYED_DELIVERY_MAX_DELAY_MS",
        "-1",
        "milliseconds",
    ),
]
INVALID_IDS = [f"{flag}={raw}" for flag, _, raw, _ in INVALID]


def test_defaults() -> None:
    config = GatewayConfig()
    assert config.port == 6650
    assert config.http_port == 8080
    assert config.bind == "0.0.0.0"
    assert config.advertised_address is None
    assert config.redis_url is None
    assert config.data_dir == "./data"
    assert config.redis_fsync == "everysec"
    assert config.redis_replica_acks == 0  # acknowledged once the master has the write
    assert config.redis_replica_ack_timeout_ms == 1000
    assert config.log_level == "INFO"
    assert config.key_prefix == "pgw"
    assert config.cluster_name == "standalone"
    assert config.max_message_size == 5 * 1024 * 1024
    assert config.keepalive_seconds == 30.0
    assert config.consumer_lease_seconds == 10.0
    assert config.gateway_id is None
    # Pulsar's broker.conf defaults: no retention of acknowledged messages, no TTL.
    assert config.default_retention_minutes == 0
    assert config.default_retention_mb == 0
    assert config.default_message_ttl_seconds == 0
    assert config.topic_maintenance_interval_seconds == 60.0
    # Pulsar's backlogQuotaCheckEnabled=true, backlogQuotaCheckIntervalInSeconds=60
    assert config.backlog_quota_check_enabled is True
    assert config.backlog_quota_check_interval_seconds == 60.0
    # Pulsar's delayedDeliveryEnabled=true, delayedDeliveryMaxDelayInMillis=0 (no limit)
    assert config.delayed_delivery_enabled is True
    assert config.delayed_delivery_max_delay_ms == 0
    # Pulsar's defaults, but for the publish buffer (Pulsar: half of the direct memory, at
    # least 64 MB), pausing unwritable connections (off in Pulsar) and the HTTP body limit
    # (none in Pulsar)
    assert config.max_pending_publish_requests_per_connection == 1000
    assert config.publish_buffer_bytes == 64 * 1024 * 1024
    assert config.pulsar_channel_write_buffer_high_water_mark == 64 * 1024
    assert config.pulsar_channel_write_buffer_low_water_mark == 32 * 1024
    assert config.pulsar_channel_pause_receiving_requests_if_unwritable is True
    assert (config.broker_max_connections, config.broker_max_connections_per_ip) == (0, 0)
    assert config.allow_auto_topic_creation is True
    assert config.allow_auto_topic_creation_type == "non-partitioned"
    assert (config.default_num_partitions, config.max_topics_per_namespace) == (1, 0)
    assert config.max_concurrent_lookup_request == 50_000
    assert config.max_unacked_messages_per_consumer == 50_000
    assert config.max_unacked_messages_per_subscription == 200_000
    assert config.http_max_request_size == 16 * 1024 * 1024


def test_parse_nothing_gives_defaults() -> None:
    assert parse_config([], {}) == GatewayConfig()


def test_unrelated_environment_is_ignored() -> None:
    environ = {"PORT": "1", "REDIS_URL": "http://x", "PULSAR_GATEWAY_UNKNOWN": "x"}
    assert parse_config([], environ) == GatewayConfig()


def test_frozen_and_slotted() -> None:
    config = GatewayConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.port = 1  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


@pytest.mark.parametrize(("field", "flag", "env", "raw", "expected"), OPTIONS, ids=OPTION_IDS)
def test_flag_sets_field(field: str, flag: str, env: str, raw: str, expected: object) -> None:
    config = parse_config([flag, raw], {})
    assert getattr(config, field) == expected
    assert type(getattr(config, field)) is type(expected)


@pytest.mark.parametrize(("field", "flag", "env", "raw", "expected"), OPTIONS, ids=OPTION_IDS)
def test_env_sets_field(field: str, flag: str, env: str, raw: str, expected: object) -> None:
    config = parse_config([], {env: raw})
    assert getattr(config, field) == expected


@pytest.mark.parametrize(("field", "flag", "env", "raw", "expected"), OPTIONS, ids=OPTION_IDS)
def test_env_names_follow_field_names(
    field: str, flag: str, env: str, raw: str, expected: object
) -> None:
    assert env == ENV_PREFIX + field.upper()
    assert flag == "--" + field.replace("_", "-")


def test_flag_wins_over_env() -> None:
    config = parse_config(
        ["--port", "7000", "--redis-url", "unix:///run/redis.sock"],
        {"PULSAR_GATEWAY_PORT": "7001", "PULSAR_GATEWAY_REDIS_URL": "redis://other"},
    )
    assert config.port == 7000
    assert config.redis_url == "unix:///run/redis.sock"


def test_env_wins_over_default_and_mixes_with_flags() -> None:
    config = parse_config(["--port", "0"], {"PULSAR_GATEWAY_HTTP_PORT": "0"})
    assert (config.port, config.http_port) == (0, 0)
    assert config.bind == GatewayConfig().bind


def test_empty_env_var_counts_as_unset() -> None:
    assert parse_config([], {"PULSAR_GATEWAY_REDIS_URL": ""}).redis_url is None
    assert parse_config([], {"PULSAR_GATEWAY_PORT": ""}).port == 6650


def test_bad_env_is_ignored_when_flag_given() -> None:
    config = parse_config(["--port", "1"], {"PULSAR_GATEWAY_PORT": "not-a-port"})
    assert config.port == 1


def test_defaults_to_process_argv_and_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["pulsar-gateway", "--port", "1234"])
    monkeypatch.setenv("PULSAR_GATEWAY_CLUSTER_NAME", "from-env")
    config = parse_config()
    assert config.port == 1234
    assert config.cluster_name == "from-env"


@pytest.mark.parametrize("url", ["redis://h:1/2", "rediss://u:p@h:6380", "unix:///tmp/r.sock"])
def test_redis_url_schemes(url: str) -> None:
    assert parse_config(["--redis-url", url], {}).redis_url == url


@pytest.mark.parametrize("level", ["debug", "Info", "WARNING", "error", "critical"])
def test_log_level_normalized(level: str) -> None:
    assert parse_config(["--log-level", level], {}).log_level == level.upper()
    assert GatewayConfig(log_level=level).log_level == level.upper()


@pytest.mark.parametrize("port", ["0", "65535"])
def test_port_bounds_accepted(port: str) -> None:
    assert parse_config(["--port", port, "--http-port", port], {}).port == int(port)


@pytest.mark.parametrize(("flag", "env", "raw", "message"), INVALID, ids=INVALID_IDS)
def test_invalid_flag_names_flag(
    capsys: pytest.CaptureFixture[str], flag: str, env: str, raw: str, message: str
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config([f"{flag}={raw}"], {})
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert message in err


@pytest.mark.parametrize(("flag", "env", "raw", "message"), INVALID, ids=INVALID_IDS)
def test_invalid_env_names_variable(
    capsys: pytest.CaptureFixture[str], flag: str, env: str, raw: str, message: str
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config([], {env: raw})
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert f"environment variable {env}" in err
    assert message in err


def test_unknown_flag_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config(["--no-such-flag"], {})
    assert excinfo.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_help_lists_every_option_and_env_var(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config(["--help"], {})
    assert excinfo.value.code == 0
    # argparse wraps to $COLUMNS; compare with whitespace removed.
    out = "".join(capsys.readouterr().out.split())
    for _, flag, env, _, _ in OPTIONS:
        assert flag in out
        assert env in out


def test_help_shows_real_defaults() -> None:
    text = "".join(build_parser().format_help().split())
    assert "default:6650" in text
    assert "default:./data" in text


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"port": 70000}, "port"),
        ({"http_port": -1}, "http_port"),
        ({"port": True}, "port"),
        ({"redis_url": "localhost"}, "redis_url"),
        ({"log_level": "LOUD"}, "log_level"),
        ({"max_message_size": 0}, "max_message_size"),
        ({"keepalive_seconds": 0.0}, "keepalive_seconds"),
        ({"consumer_lease_seconds": -2.0}, "consumer_lease_seconds"),
        ({"key_prefix": ""}, "key_prefix"),
        ({"gateway_id": "two words"}, "gateway_id"),
        (
            {"max_pending_publish_requests_per_connection": 0},
            "max_pending_publish_requests_per_connection",
        ),
        ({"max_message_publish_buffer_size_in_mb": -2}, "max_message_publish_buffer_size_in_mb"),
        ({"broker_max_connections": -1}, "broker_max_connections"),
        ({"allow_auto_topic_creation_type": "sharded"}, "allow_auto_topic_creation_type"),
        ({"default_num_partitions": 0}, "default_num_partitions"),
        ({"max_topics_per_namespace": -1}, "max_topics_per_namespace"),
        ({"max_unacked_messages_per_consumer": -1}, "max_unacked_messages_per_consumer"),
        ({"http_max_request_size": 0}, "http_max_request_size"),
    ],
)
def test_direct_construction_validates(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        GatewayConfig(**kwargs)  # type: ignore[arg-type]


def test_workers_auto_is_one_per_cpu_this_process_may_use() -> None:
    assert parse_config(["--workers", "auto"]).workers == available_cpus() >= 1
    assert parse_config([], environ={"PULSAR_GATEWAY_WORKERS": "AUTO"}).workers == available_cpus()
    assert parse_config([]).workers == 1


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_workers_must_be_a_positive_count_or_auto(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_config(["--workers", value])
    assert exc.value.code == 2
    assert "argument --workers" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"port": 0}, "port"),
        ({"http_port": 0}, "http_port"),
        (
            {"tls_certificate_file_path": "c.pem", "tls_key_file_path": "k.pem", "port_tls": 0},
            "port_tls",
        ),
        (
            {
                "tls_certificate_file_path": "c.pem",
                "tls_key_file_path": "k.pem",
                "http_port_tls": 0,
            },
            "http_port_tls",
        ),
    ],
)
def test_workers_share_fixed_ports_only(kwargs: dict[str, object], name: str) -> None:
    # each worker would bind a free port of its own: no client could be told them all
    with pytest.raises(ValueError, match=f"^workers: 2 workers share every port; {name} 0 "):
        GatewayConfig(workers=2, **kwargs)  # type: ignore[arg-type]
    GatewayConfig(workers=1, **kwargs)  # type: ignore[arg-type]  # one process: any port


def test_write_buffer_low_water_mark_must_not_exceed_the_high_one() -> None:
    with pytest.raises(ValueError, match="low_water_mark must not exceed"):
        GatewayConfig(
            pulsar_channel_write_buffer_high_water_mark=1000,
            pulsar_channel_write_buffer_low_water_mark=2000,
        )


def test_a_publish_buffer_of_zero_or_minus_one_has_no_limit() -> None:
    assert GatewayConfig(max_message_publish_buffer_size_in_mb=0).publish_buffer_bytes == 0
    assert GatewayConfig(max_message_publish_buffer_size_in_mb=-1).publish_buffer_bytes == 0


def test_direct_construction_normalizes_int_seconds() -> None:
    config = GatewayConfig(keepalive_seconds=5, gateway_id="gw-1")
    assert config.keepalive_seconds == 5.0
    assert isinstance(config.keepalive_seconds, float)
    assert config.gateway_id == "gw-1"


@pytest.mark.parametrize(
    ("bind", "advertised", "expected"),
    [
        ("0.0.0.0", None, "127.0.0.1"),
        ("::", None, "127.0.0.1"),
        ("10.1.2.3", None, "10.1.2.3"),
        ("localhost", None, "localhost"),
        ("0.0.0.0", "broker.example", "broker.example"),
        ("10.1.2.3", "broker.example", "broker.example"),
    ],
)
def test_advertised_host(bind: str, advertised: str | None, expected: str) -> None:
    assert GatewayConfig(bind=bind, advertised_address=advertised).advertised_host == expected


def test_advertised_host_from_flags() -> None:
    assert parse_config(["--bind", "192.168.1.5"], {}).advertised_host == "192.168.1.5"
    environ = {"PULSAR_GATEWAY_ADVERTISED_ADDRESS": "pgw.local"}
    assert parse_config([], environ).advertised_host == "pgw.local"


# -- TLS ----------------------------------------------------------------------------------

_TLS_FLAGS = ["--tls-certificate-file-path", "/c.pem", "--tls-key-file-path", "/k.pem"]


def test_tls_is_off_without_a_certificate() -> None:
    config = GatewayConfig()
    assert config.tls_enabled is False
    assert config.binary_port_tls is None
    assert config.web_port_tls is None


def test_tls_ports_default_to_pulsars_with_a_certificate() -> None:
    config = parse_config(_TLS_FLAGS, {})
    assert config.tls_enabled is True
    assert (config.binary_port_tls, config.web_port_tls) == (6651, 8443)
    assert config.tls_require_trusted_client_cert_on_connect is False
    assert config.tls_allow_insecure_connection is False


def test_tls_options_from_flags_and_environment() -> None:
    config = parse_config(
        [
            *_TLS_FLAGS,
            "--port-tls",
            "16651",
            "--tls-require-trusted-client-cert-on-connect",
            "true",
        ],
        {
            "PULSAR_GATEWAY_HTTP_PORT_TLS": "18443",
            "PULSAR_GATEWAY_TLS_TRUST_CERTS_FILE_PATH": "/ca.pem",
        },
    )
    assert config.tls_certificate_file_path == "/c.pem"
    assert config.tls_key_file_path == "/k.pem"
    assert config.tls_trust_certs_file_path == "/ca.pem"
    assert (config.binary_port_tls, config.web_port_tls) == (16651, 18443)
    assert config.tls_require_trusted_client_cert_on_connect is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tls_certificate_file_path": "/c.pem"}, "give both or neither"),
        ({"tls_key_file_path": "/k.pem"}, "give both or neither"),
        ({"port_tls": 6651}, "port_tls: needs tls_certificate_file_path"),
        ({"http_port_tls": 8443}, "http_port_tls: needs tls_certificate_file_path"),
        ({"tls_trust_certs_file_path": "/ca.pem"}, "needs tls_certificate_file_path"),
        (
            {
                "tls_certificate_file_path": "/c.pem",
                "tls_key_file_path": "/k.pem",
                "tls_require_trusted_client_cert_on_connect": True,
            },
            "needs tls_trust_certs_file_path",
        ),
        (
            {
                "tls_certificate_file_path": "/c.pem",
                "tls_key_file_path": "/k.pem",
                "tls_trust_certs_file_path": "/ca.pem",
                "tls_require_trusted_client_cert_on_connect": True,
                "tls_allow_insecure_connection": True,
            },
            "contradict",
        ),
        ({"port_tls": 70000}, "port_tls: port must be in"),
    ],
)
def test_tls_options_that_do_not_fit_together(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GatewayConfig(**kwargs)  # type: ignore[arg-type]


def test_contradictory_tls_flags_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config(["--tls-key-file-path", "/k.pem"], {})
    assert excinfo.value.code == 2
    assert "give both or neither" in capsys.readouterr().err


# -- advertised listeners ---------------------------------------------------------------------


def test_advertised_listeners_parsed() -> None:
    config = parse_config(
        [
            "--advertised-listeners",
            "internal:pulsar://10.0.0.1:6650, internal:pulsar+ssl://10.0.0.1:6651,"
            "external:pulsar+ssl://gw.example:443,external:https://gw.example:8443",
        ],
        {},
    )
    internal, external = config.listeners["internal"], config.listeners["external"]
    assert internal.broker_service_url == "pulsar://10.0.0.1:6650"
    assert internal.broker_service_url_tls == "pulsar+ssl://10.0.0.1:6651"
    assert internal.web_service_url is None
    assert external.broker_service_url is None
    assert external.web_service_url_tls == "https://gw.example:8443"
    assert GatewayConfig().listeners == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("pulsar://10.0.0.1:6650", "of listener 'pulsar' is not a pulsar://"),  # no name
        ("internal:", "is not <listener name>:<URL>"),
        ("internal:kafka://10.0.0.1:9092", "is not a pulsar://"),
        ("internal:pulsar://10.0.0.1", "with a host and a port"),
        ("a:pulsar://h:1,a:pulsar://h:2", "names two pulsar:// URLs"),
        ("a:pulsar://h:1,b:pulsar+ssl://h:1", "h:1 is named by listeners 'a' and 'b'"),
        ("a:http://h:8080", "names no pulsar:// or pulsar+ssl:// URL"),
    ],
)
def test_advertised_listeners_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        GatewayConfig(advertised_listeners=value)


def test_bad_advertised_listeners_flag_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        parse_config(["--advertised-listeners", "internal"], {})
    assert excinfo.value.code == 2
    assert "--advertised-listeners" in capsys.readouterr().err


def test_version_says_which_build_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_config(["--version"])
    assert exc.value.code == 0
    text = capsys.readouterr().out.strip()
    assert re.fullmatch(
        r"pulsar-gateway \S+ \((pure Python|compiled \(mypyc, \d+ modules\))\)", text
    )
    assert text.endswith(f"({build_info()})")
