"""Token validation (pulsar_gateway.core.policies.authentication) and the CONNECT handshake with
authentication (pulsar_gateway.adapters.pulsar_binary.connection), without sockets or Redis. Tokens
are signed here with
PyJWT, as an operator's tooling would sign them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from pulsar_gateway import frame_codec
from pulsar_gateway.adapters.peer_certificate import certificate_role
from pulsar_gateway.adapters.pulsar_binary.connection import ConnectionState, ServerConnection
from pulsar_gateway.core.errors import AuthenticationError
from pulsar_gateway.core.policies.authentication import (
    AuthenticatedRole,
    AuthenticationProviderTls,
    AuthenticationProviderToken,
    AuthenticationService,
    bearer_token,
    read_key,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pulsar_gateway.server.config import GatewayConfig, parse_config
from tests.frames import command

T = pb.BaseCommand.Type

SECRET = b"0123456789abcdef0123456789abcdef"  # 32 bytes: the least HS256 allows
OTHER_SECRET = b"fedcba9876543210fedcba9876543210"


def hs256(claims: dict[str, Any], key: bytes = SECRET, **headers: Any) -> str:
    return jwt.encode(claims, key, algorithm="HS256", headers=headers or None)


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def der(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    """The public key as ``pulsar tokens create-key-pair`` writes it: X.509 DER."""
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.fixture
def provider() -> AuthenticationProviderToken:
    return AuthenticationProviderToken(secret_key=SECRET)


# -- tokens --------------------------------------------------------------------------------


def test_valid_token_gives_the_sub_claim(provider: AuthenticationProviderToken) -> None:
    exp = int(time.time()) + 3600
    assert provider.authenticate(hs256({"sub": "app", "exp": exp})) == AuthenticatedRole(
        "app", float(exp)
    )


def test_token_without_exp_never_expires(provider: AuthenticationProviderToken) -> None:
    authenticated = provider.authenticate(hs256({"sub": "app"}))
    assert authenticated.expires_at is None
    assert not authenticated.expired(time.time() + 10 * 365 * 86400)


def test_expired_token_is_refused(provider: AuthenticationProviderToken) -> None:
    with pytest.raises(AuthenticationError, match="expired"):
        provider.authenticate(hs256({"sub": "app", "exp": int(time.time()) - 5}))


def test_token_not_valid_yet_is_refused(provider: AuthenticationProviderToken) -> None:
    with pytest.raises(AuthenticationError):
        provider.authenticate(hs256({"sub": "app", "nbf": int(time.time()) + 600}))


def test_bad_signature_is_refused(provider: AuthenticationProviderToken) -> None:
    with pytest.raises(AuthenticationError, match="Signature"):
        provider.authenticate(hs256({"sub": "app"}, key=OTHER_SECRET))


def test_tampered_payload_is_refused(provider: AuthenticationProviderToken) -> None:
    header, _, signature = hs256({"sub": "app"}).split(".")
    forged = base64.urlsafe_b64encode(b'{"sub":"admin"}').rstrip(b"=").decode()
    with pytest.raises(AuthenticationError):
        provider.authenticate(f"{header}.{forged}.{signature}")


def test_unsigned_token_is_refused(provider: AuthenticationProviderToken) -> None:
    token = jwt.encode({"sub": "admin"}, None, algorithm="none")
    with pytest.raises(AuthenticationError, match="alg"):
        provider.authenticate(token)


def test_hmac_token_is_refused_by_a_public_key(rsa_key: rsa.RSAPrivateKey) -> None:
    """The algorithm-confusion attack: HS256 keyed with the (public) RSA key's bytes."""
    public = pem(rsa_key)
    verifier = AuthenticationProviderToken(public_key=public)

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(b'{"sub":"admin"}')
    signature = hmac.new(public, signing_input.encode(), hashlib.sha256).digest()
    with pytest.raises(AuthenticationError, match="alg"):
        verifier.authenticate(signing_input + "." + b64(signature))


def test_rs256_token_is_refused_by_a_secret_key(
    provider: AuthenticationProviderToken, rsa_key: rsa.RSAPrivateKey
) -> None:
    token = jwt.encode({"sub": "app"}, rsa_key, algorithm="RS256")
    with pytest.raises(AuthenticationError, match="alg"):
        provider.authenticate(token)


def test_missing_role_claim_is_refused(provider: AuthenticationProviderToken) -> None:
    with pytest.raises(AuthenticationError, match="'sub' claim"):
        provider.authenticate(hs256({"exp": int(time.time()) + 60}))


def test_role_from_the_configured_claim() -> None:
    verifier = AuthenticationProviderToken(secret_key=SECRET, role_claim="role")
    assert verifier.authenticate(hs256({"sub": "x", "role": "app"})).role == "app"
    with pytest.raises(AuthenticationError, match="'role' claim"):
        verifier.authenticate(hs256({"sub": "x"}))


def test_list_claim_gives_its_first_string(provider: AuthenticationProviderToken) -> None:
    # AuthenticationProviderToken.getPrincipal reads a list claim's first element.
    assert provider.authenticate(hs256({"sub": ["app", "other"]})).role == "app"
    with pytest.raises(AuthenticationError):
        provider.authenticate(hs256({"sub": []}))


def test_iat_and_aud_are_not_checked(provider: AuthenticationProviderToken) -> None:
    # jjwt ignores iat; Pulsar checks aud only with tokenAudienceClaim (not offered).
    claims = {"sub": "app", "iat": int(time.time()) + 3600, "aud": "elsewhere"}
    assert provider.authenticate(hs256(claims)).role == "app"


@pytest.mark.parametrize("token", ["", "   ", "not-a-jwt", "a.b.c", "e30.e30.e30"])
def test_malformed_tokens_are_refused(provider: AuthenticationProviderToken, token: str) -> None:
    with pytest.raises(AuthenticationError):
        provider.authenticate(token)


def test_rs256_public_key_from_a_der_file(rsa_key: rsa.RSAPrivateKey, tmp_path: Path) -> None:
    path = tmp_path / "public.key"
    path.write_bytes(der(rsa_key))
    config = GatewayConfig(authentication_enabled=True, token_public_key=f"file://{path}")
    verifier = _provider(config)
    token = jwt.encode({"sub": "app"}, rsa_key, algorithm="RS256")
    assert verifier.authenticate(token).role == "app"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(AuthenticationError):
        verifier.authenticate(jwt.encode({"sub": "app"}, other, algorithm="RS256"))


def test_es256_public_key_as_pem_data_url(ec_key: ec.EllipticCurvePrivateKey) -> None:
    url = "data:;base64," + base64.b64encode(pem(ec_key)).decode()
    config = GatewayConfig(authentication_enabled=True, token_public_key=url)
    verifier = _provider(config)
    assert verifier.algorithms == ["ES256"]
    token = jwt.encode({"sub": "app"}, ec_key, algorithm="ES256")
    assert verifier.authenticate(token).role == "app"


def test_short_rsa_key_is_refused() -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ValueError, match="2048"):
        AuthenticationProviderToken(public_key=der(weak))


def test_short_secret_is_refused() -> None:
    # jjwt's Keys.hmacShaKeyFor refuses keys under 256 bits.
    with pytest.raises(ValueError, match="32"):
        AuthenticationProviderToken(secret_key=b"too short")


def test_longer_secret_allows_longer_hmac() -> None:
    key = bytes(range(64))
    verifier = AuthenticationProviderToken(secret_key=key)
    assert verifier.algorithms == ["HS256", "HS384", "HS512"]
    token = jwt.encode({"sub": "app"}, key, algorithm="HS512")
    assert verifier.authenticate(token).role == "app"


# -- key settings ------------------------------------------------------------------------


def test_read_key_forms(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    path.write_bytes(SECRET)
    encoded = base64.b64encode(SECRET).decode()
    assert read_key(f"file://{path}") == SECRET
    assert read_key(str(path)) == SECRET
    assert read_key(f"data:;base64,{encoded}") == SECRET
    assert read_key(f"data:application/octet-stream;base64,{encoded}") == SECRET
    assert read_key(encoded) == SECRET
    assert read_key(base64.urlsafe_b64encode(b"\xfb\xff" * 16).decode()) == b"\xfb\xff" * 16


@pytest.mark.parametrize("value", ["data:;base64", "not base64!", f"file:///{'x' * 12}/none"])
def test_read_key_refuses(value: str) -> None:
    with pytest.raises(ValueError):
        read_key(value)


def _provider(config: GatewayConfig) -> AuthenticationProviderToken:
    """The provider the composition root builds from a configuration."""
    return AuthenticationProviderToken.from_settings(
        secret_key=config.token_secret_key,
        public_key=config.token_public_key,
        role_claim=config.token_auth_claim,
    )


def _service(config: GatewayConfig) -> AuthenticationService:
    return AuthenticationService.from_settings(
        enabled=config.authentication_enabled,
        secret_key=config.token_secret_key,
        public_key=config.token_public_key,
        role_claim=config.token_auth_claim,
    )


def test_from_config_needs_a_key() -> None:
    with pytest.raises(ValueError, match="token_secret_key or token_public_key"):
        _service(GatewayConfig(authentication_enabled=True))
    assert not _service(GatewayConfig()).enabled


def test_secret_key_wins_over_public_key(rsa_key: rsa.RSAPrivateKey) -> None:
    config = GatewayConfig(
        authentication_enabled=True,
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        token_public_key="data:;base64," + base64.b64encode(der(rsa_key)).decode(),
    )
    assert _provider(config).algorithms == ["HS256"]


def test_config_flags_and_environment() -> None:
    config = parse_config(
        ["--authentication-enabled", "true", "--superuser-roles", "admin, ops,admin"],
        {
            "PULSAR_GATEWAY_AUTHORIZATION_ENABLED": "yes",
            "PULSAR_GATEWAY_TOKEN_SECRET_KEY": "file:///etc/pulsar/secret.key",
            "PULSAR_GATEWAY_TOKEN_AUTH_CLAIM": "role",
            "PULSAR_GATEWAY_AUTHENTICATE_METRICS_ENDPOINT": "true",
        },
    )
    assert config.authentication_enabled and config.authorization_enabled
    assert config.superuser_roles == ("admin", "ops")
    assert config.token_secret_key == "file:///etc/pulsar/secret.key"
    assert config.token_public_key is None
    assert config.token_auth_claim == "role"
    assert config.authenticate_metrics_endpoint
    defaults = GatewayConfig()
    assert not defaults.authentication_enabled and not defaults.authorization_enabled
    assert defaults.superuser_roles == () and defaults.token_auth_claim == "sub"
    with pytest.raises(ValueError, match="superuser_roles"):
        GatewayConfig(superuser_roles=42)  # type: ignore[arg-type]


# -- HTTP and binary credentials -----------------------------------------------------------


def test_bearer_header() -> None:
    assert bearer_token("Bearer abc.def.ghi") == "abc.def.ghi"
    for bad in (None, "", "abc.def.ghi", "Basic dXNlcjpwYXNz", "bearer abc"):
        with pytest.raises(AuthenticationError, match="Invalid HTTP Authorization header"):
            bearer_token(bad)


def test_service_authenticates_command_and_http(provider: AuthenticationProviderToken) -> None:
    service = AuthenticationService(provider)
    token = hs256({"sub": "app"})
    assert service.authenticate_command("token", token.encode()).role == "app"
    assert service.authenticate_http(f"Bearer {token}").role == "app"
    with pytest.raises(AuthenticationError, match="no authentication provider"):
        service.authenticate_command("none", b"")
    with pytest.raises(AuthenticationError):
        service.authenticate_command("token", b"\xff\xfe")
    with pytest.raises(AuthenticationError):
        service.authenticate_http(None)


# -- the CONNECT handshake -----------------------------------------------------------------


def connect_frame(method: str, data: bytes | None, refresh: bool = False) -> bytes:
    cmd = command(T.CONNECT, client_version="test", protocol_version=20, auth_method_name=method)
    if data is not None:
        cmd.connect.auth_data = data
    if refresh:
        cmd.connect.feature_flags.supports_auth_refresh = True
    return frame_codec.encode_command(cmd)


def auth_response_frame(method: str, data: bytes) -> bytes:
    cmd = command(T.AUTH_RESPONSE, client_version="test")
    cmd.authResponse.response.auth_method_name = method
    cmd.authResponse.response.auth_data = data
    return frame_codec.encode_command(cmd)


def out(conn: ServerConnection) -> list[pb.BaseCommand]:
    decoder = frame_codec.FrameDecoder(1 << 20)
    decoder.feed(conn.data_to_send())
    frames = []
    while (f := decoder.next_frame()) is not None:
        frames.append(f.command)
    return frames


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def auth_connection(clock: Clock | None = None) -> ServerConnection:
    service = AuthenticationService(AuthenticationProviderToken(secret_key=SECRET))
    return ServerConnection(
        authenticate=service.authenticate_command,
        clock=clock or Clock(),
        auth_refresh_seconds=60,
    )


def test_connect_with_a_valid_token() -> None:
    conn = auth_connection()
    conn.receive_data(connect_frame("token", hs256({"sub": "app"}).encode()))
    [connected] = out(conn)
    assert connected.type == T.CONNECTED
    assert conn.state is ConnectionState.CONNECTED
    assert conn.authenticated == AuthenticatedRole("app")
    assert [type(e).__name__ for e in conn.events_received()] == ["Connect"]


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("token", hs256({"sub": "app"}, key=OTHER_SECRET).encode()),
        ("token", hs256({"sub": "app", "exp": int(time.time()) - 1}).encode()),
        ("token", None),
        ("none", None),
        ("basic", b"user:password"),
    ],
)
def test_connect_refused_with_authentication_error(method: str, data: bytes | None) -> None:
    conn = auth_connection()
    conn.receive_data(connect_frame(method, data))
    [error] = out(conn)
    # ServerCnx.authenticationFailed: ERROR(-1, AuthenticationError, "Failed to authenticate").
    assert error.type == T.ERROR
    assert error.error.error == pb.AuthenticationError
    assert error.error.message == "Failed to authenticate"
    assert error.error.request_id == (1 << 64) - 1
    assert conn.close_expected() and conn.state is ConnectionState.CLOSED
    assert conn.events_received() == []
    assert conn.authenticated is None


def test_a_client_that_cannot_refresh_is_closed_once_its_token_expired() -> None:
    clock = Clock()
    conn = auth_connection(clock)
    token = hs256({"sub": "app", "exp": int(clock.now) + 60})
    conn.receive_data(connect_frame("token", token.encode()))  # no supports_auth_refresh
    out(conn)
    conn.auth_refresh_tick()
    assert not conn.close_expected()
    assert out(conn) == []  # nothing asked of a client that cannot answer
    clock.now += 61
    conn.auth_refresh_tick()
    assert conn.close_expected()
    assert "expired" in conn.close_reason


def refreshing_connection(lifetime: int) -> tuple[ServerConnection, Clock, int]:
    """A connection of a client that supports auth refresh, CONNECTed with a token of role
    ``app`` expiring ``lifetime`` seconds after the returned start time."""
    clock = Clock()
    conn = auth_connection(clock)
    start = int(clock.now)
    token = hs256({"sub": "app", "exp": start + lifetime})
    conn.receive_data(connect_frame("token", token.encode(), refresh=True))
    out(conn)
    return conn, clock, start


def test_credentials_are_refreshed_before_they_expire() -> None:
    """ServerCnx.refreshAuthenticationCredentials: AUTH_CHALLENGE once the token will have
    expired within two checks (60 s each); the AUTH_RESPONSE's token replaces it (same
    role), so the connection outlives every token it was given."""
    conn, clock, start = refreshing_connection(200)
    clock.now = start + 70
    conn.auth_refresh_tick()  # 130 s left: beyond the next two checks
    assert out(conn) == []
    clock.now = start + 90
    conn.auth_refresh_tick()  # 110 s left: asked now, a whole check before it lapses
    [challenge] = out(conn)
    assert challenge.type == T.AUTH_CHALLENGE
    assert challenge.authChallenge.challenge.auth_method_name == "token"
    assert challenge.authChallenge.challenge.auth_data == b"PulsarAuthRefresh"
    assert conn.auth_challenge_pending
    conn.auth_refresh_tick()  # asked once until answered
    assert out(conn) == []
    fresh = hs256({"sub": "app", "exp": start + 500})
    conn.receive_data(auth_response_frame("token", fresh.encode()))
    assert out(conn) == []  # no CONNECTED again (it would drop the client)
    # the session never sees the refresh
    assert [type(e).__name__ for e in conn.events_received()] == ["Connect"]
    assert not conn.auth_challenge_pending
    assert conn.authenticated is not None and conn.authenticated.expires_at == start + 500
    clock.now = start + 250
    conn.auth_refresh_tick()  # the first token lapsed, the connection did not
    assert not conn.close_expected()
    assert out(conn) == []


def test_no_answer_to_the_challenge_before_the_expiry_closes() -> None:
    conn, clock, start = refreshing_connection(10)
    conn.auth_refresh_tick()
    assert [c.type for c in out(conn)] == [T.AUTH_CHALLENGE]
    clock.now = start + 11
    conn.auth_refresh_tick()
    assert conn.close_expected()
    assert "no refreshed credentials" in conn.close_reason


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (hs256({"sub": "app"}, key=OTHER_SECRET), "refused"),
        (hs256({"sub": "another-role"}), "name role 'another-role'"),
    ],
    ids=["bad-token", "other-role"],
)
def test_refreshed_credentials_that_fail_close_the_connection(response: str, reason: str) -> None:
    conn, _, _ = refreshing_connection(10)
    conn.auth_refresh_tick()
    out(conn)
    conn.receive_data(auth_response_frame("token", response.encode()))
    [error] = out(conn)
    assert error.type == T.ERROR and error.error.error == pb.AuthenticationError
    assert conn.close_expected()
    assert reason in conn.close_reason


def test_auth_response_before_connect_is_refused() -> None:
    conn = auth_connection()
    conn.receive_data(auth_response_frame("token", hs256({"sub": "app"}).encode()))
    assert conn.close_expected()
    assert conn.state is ConnectionState.CLOSED


def test_without_authentication_credentials_are_ignored() -> None:
    conn = ServerConnection()
    conn.receive_data(connect_frame("token", b"anything"))
    assert [c.type for c in out(conn)] == [T.CONNECTED]
    assert conn.authenticated is None


# -- TLS client certificates (AuthenticationProviderTls) -------------------------------------


def test_tls_provider_takes_the_certificate_role() -> None:
    service = AuthenticationService(AuthenticationProviderTls())
    assert service.enabled
    assert service.authenticate_command("tls", b"", "app-1").role == "app-1"
    assert service.authenticate_command("tls", b"", "app-1").expires_at is None
    with pytest.raises(AuthenticationError, match="unable to authenticate with TLS certificate"):
        service.authenticate_command("tls", b"", None)
    # no token provider: a token is no credential
    with pytest.raises(AuthenticationError, match="no authentication provider for 'token'"):
        service.authenticate_command("token", b"x.y.z", "app-1")
    # over HTTP, the certificate
    assert service.authenticate_http(None, "admin-1").role == "admin-1"
    with pytest.raises(AuthenticationError, match="Authentication required"):
        service.authenticate_http(None, None)
    # a request naming no method is tried against every provider (AuthenticationService
    # .authenticateHttpRequest): the certificate authenticates it whatever else it carries
    assert service.authenticate_http("Bearer x.y.z", "admin-1").role == "admin-1"
    with pytest.raises(AuthenticationError, match="Unsupported authentication method"):
        service.authenticate_http("Bearer x.y.z", "admin-1", method="token")


def test_token_and_tls_providers_together(provider: AuthenticationProviderToken) -> None:
    service = AuthenticationService(provider, AuthenticationProviderTls())
    token = hs256({"sub": "app"})
    assert service.authenticate_command("token", token.encode(), "cert-role").role == "app"
    assert service.authenticate_command("tls", b"", "cert-role").role == "cert-role"
    # the provider the header's scheme names first; without a header, the certificate
    assert service.authenticate_http(f"Bearer {token}", "cert-role").role == "app"
    assert service.authenticate_http(None, "cert-role").role == "cert-role"
    # a bad token, no method named: the other providers are tried, as in Pulsar
    assert service.authenticate_http("Bearer not-a-token", "cert-role").role == "cert-role"
    with pytest.raises(AuthenticationError, match="Authentication required"):
        service.authenticate_http("Bearer not-a-token", None)
    # the method named: that provider alone decides
    with pytest.raises(AuthenticationError, match="Failed to authentication token"):
        service.authenticate_http("Bearer not-a-token", "cert-role", method="token")
    assert service.authenticate_http(None, "cert-role", method="tls").role == "cert-role"
    with pytest.raises(AuthenticationError, match="no authentication provider"):
        service.authenticate_command("basic", b"u:p", "cert-role")


def test_token_provider_alone_refuses_tls_method(provider: AuthenticationProviderToken) -> None:
    service = AuthenticationService(provider)
    with pytest.raises(AuthenticationError, match="no authentication provider for 'tls'"):
        service.authenticate_command("tls", b"", "app-1")


def test_providers_from_settings() -> None:
    tls_only = AuthenticationService.from_settings(enabled=True, providers=("tls",))
    assert list(tls_only.providers) == ["tls"]
    with pytest.raises(ValueError, match="token_secret_key"):
        AuthenticationService.from_settings(enabled=True, providers=("token", "tls"))
    assert not AuthenticationService.from_settings(enabled=False, providers=("tls",)).enabled


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("tls", ("tls",)),
        ("token, tls", ("token", "tls")),
        (
            "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
            "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
            ("token", "tls"),
        ),
        ("tls,tls", ("tls",)),
    ],
)
def test_authentication_providers_option(raw: str, expected: tuple[str, ...]) -> None:
    assert parse_config(["--authentication-providers", raw], {}).authentication_providers == (
        expected
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"authentication_providers": "kerberos"}, "unknown authentication provider"),
        ({"authentication_providers": ""}, "at least one provider"),
        (
            {"authentication_enabled": True, "authentication_providers": ("tls",)},
            "tls needs tls_trust_certs_file_path",
        ),
        (
            {
                "authentication_enabled": True,
                "authentication_providers": ("tls",),
                "tls_certificate_file_path": "/c.pem",
                "tls_key_file_path": "/k.pem",
                "tls_trust_certs_file_path": "/ca.pem",
                "tls_allow_insecure_connection": True,
            },
            "without tls_allow_insecure_connection",
        ),
    ],
)
def test_authentication_providers_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GatewayConfig(**kwargs)  # type: ignore[arg-type]


def test_certificate_role_is_the_subject_common_name() -> None:
    subject = ((("organizationName", "acme"),), (("commonName", "app-1"),))
    assert certificate_role({"subject": subject, "issuer": ()}) == "app-1"
    assert certificate_role({}) is None  # not verified, or not asked for
    assert certificate_role(None) is None  # a plain connection
    assert certificate_role({"subject": ((("organizationName", "acme"),),)}) is None
