"""``GET /admin/v2/brokers/configuration/runtime``'s map: broker.conf names, Java's spelling
of values, and never a secret."""

from __future__ import annotations

from dataclasses import fields

from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.runtime_configuration import PULSAR_NAMES, runtime_configuration

#: Settings that are or may hold a secret (a key, a password file, credentials in a URL).
SECRETS = ("token_secret_key", "token_public_key", "basic_auth_conf", "tls_key_file_path")


def test_every_listed_setting_exists_and_no_secret_is_listed() -> None:
    settings = {f.name for f in fields(GatewayConfig)}
    assert set(PULSAR_NAMES) <= settings
    assert not set(PULSAR_NAMES) & {*SECRETS, "redis_url"}
    assert len(set(PULSAR_NAMES.values())) == len(PULSAR_NAMES)  # one setting per name


def test_values_are_written_as_java_writes_them() -> None:
    config = GatewayConfig(
        port=6651,
        keepalive_seconds=45.0,
        authentication_enabled=True,
        superuser_roles=("admin", "ops"),
        authentication_providers=("token",),
        token_secret_key="data:;base64,c2VjcmV0",
        stats_interval_seconds=2.5,
    )
    runtime = runtime_configuration(config)
    assert runtime["brokerServicePort"] == "6651"
    assert runtime["keepAliveIntervalSeconds"] == "45"
    assert runtime["statsUpdateFrequencyInSecs"] == "2.5"
    assert runtime["authenticationEnabled"] == "true"
    assert runtime["superUserRoles"] == "admin,ops"
    assert runtime["authenticationProviders"] == "token"
    assert "advertisedAddress" not in runtime  # unset: left out
    assert list(runtime) == sorted(runtime)


def test_no_secret_reaches_the_answer() -> None:
    secret = "data:;base64,c2VjcmV0LWtleS1ieXRlcy10aGF0LW11c3Qtbm90LWxlYWs="
    config = GatewayConfig(
        token_secret_key=secret,
        redis_url="redis://user:hunter2@redis.example:6379/0",
    )
    text = repr(runtime_configuration(config))
    assert secret not in text and "hunter2" not in text and "redis.example" not in text
