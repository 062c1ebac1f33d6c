"""Basic authentication (Pulsar's ``AuthenticationProviderBasic``), the anonymous role and
several providers at once (``AuthenticationService``), without sockets or Redis: the
password file, the hash checks against reference vectors, the credentials' parsing, the
service's choice of provider, the settings, and the CONNECT handshake.

Hash vectors and where they come from:

* Pulsar's own test file, pulsar-broker-common
  ``src/test/resources/authentication/basic/.htpasswd`` (``superUser`` / ``supepass`` in
  DES crypt, ``superUser2`` / ``superpassword`` and ``client1`` / ``123456`` in apr1);
* the Python client's test service, apache/pulsar-client-python
  ``tests/test-conf/.htpasswd`` (``admin`` / ``123456``, apr1);
* ``openssl passwd -apr1 -salt S PASSWORD`` (OpenSSL 3.0) and libc's ``crypt(3)`` (traditional
  DES, through Python 3.11's ``crypt`` module), run once to make the constants below;
  ``openssl passwd -1 / -5 / -6`` for hashes Pulsar cannot check.
"""

from __future__ import annotations

import base64
from pathlib import Path

import jwt
import pytest

from pulsar_gateway import frame_codec
from pulsar_gateway.adapters.pulsar_binary.connection import ConnectionState, ServerConnection
from pulsar_gateway.core.errors import AuthenticationError
from pulsar_gateway.core.policies.authentication import (
    AuthenticationProviderBasic,
    AuthenticationProviderTls,
    AuthenticationProviderToken,
    AuthenticationService,
    basic_credentials,
)
from pulsar_gateway.core.policies.htpasswd import check_password, java_split, parse_htpasswd
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pulsar_gateway.server.config import GatewayConfig, parse_config
from tests.frames import command

T = pb.BaseCommand.Type
SECRET = b"0123456789abcdef0123456789abcdef"

#: (stored hash, password): each must match.
MATCHING = [
    # Pulsar's AuthenticationProviderBasicTest file
    ("mQQQIsyvvKRtU", "supepass"),
    ("$apr1$foobarmq$kuSZlLgOITksCkRgl57ie/", "superpassword"),
    ("$apr1$GiGKS2JU$N6soC.W2fIQ/oPVej37cM.", "123456"),
    # the Python client's test service
    ("$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.", "123456"),
    # openssl passwd -apr1: a short salt, a salt with '.' and '/', UTF-8, a space
    ("$apr1$Zz$H/ICz6PKLmM8QuZS5xd5a0", "with space"),
    ("$apr1$a.b/C9$7f.fkLz6YcXHHN.OgeVjy1", "pässwörd"),
    # crypt(3), traditional DES
    ("abNANd1rDfiNc", "secret"),
    ("./ZU9PtBe17YE", "s3cret"),
    ("mQSQCCMRSxu/o", "pässwörd"),
    # DES crypt reads 8 bytes of the password: anything after them is ignored
    ("abD6HAB6eqg.k", "longpass"),
    ("abD6HAB6eqg.k", "longpassword-over-8"),
]

#: (stored hash, password): each must not match.
NOT_MATCHING = [
    ("mQQQIsyvvKRtU", "superpassword"),  # wrong password
    ("$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.", "1234567"),
    ("abD6HAB6eqg.k", "longpas"),
    # MD5, SHA-256, SHA-512 crypt of "secret": Pulsar hands Crypt.crypt only the first two
    # characters ("$1", "$5", "$6") as salt, which UnixCrypt refuses, so none can match
    ("$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I1", "secret"),
    ("$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA", "secret"),
    (
        "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN"
        ".Pq.H91p5hVO1",
        "secret",
    ),
    # apr1 that does not split into four fields, or with an empty salt
    ("$apr1$FG4AO6aX", "123456"),
    ("$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.$", "123456"),  # a trailing '$' is dropped: 4
    ("$apr1$$KGYPuMoLUou3i6vUkPUUf.", "123456"),
    # not two salt characters of DES crypt's alphabet
    ("", ""),
    ("a", "a"),
    ("a!NANd1rDfiNc", "secret"),
    # a NUL byte DES crypt will not hash
    ("abNANd1rDfiNc", "sec\x00ret"),
]


@pytest.mark.parametrize(("stored", "password"), MATCHING)
def test_hashes_pulsar_accepts_match(stored: str, password: str) -> None:
    assert check_password(stored, password)


@pytest.mark.parametrize(("stored", "password"), NOT_MATCHING)
def test_other_hashes_and_passwords_do_not_match(stored: str, password: str) -> None:
    # the trailing-'$' case: Java's split drops the empty last field, so it has four
    # fields, hashes to the same string without the '$', and differs from the stored one
    assert not check_password(stored, password)


@pytest.mark.parametrize(
    ("text", "separator", "fields"),
    [
        ("a:b", ":", ["a", "b"]),
        ("a:", ":", ["a"]),
        (":", ":", []),
        ("", ":", [""]),
        (":b", ":", ["", "b"]),
        ("a::", ":", ["a"]),
        ("a:b:c", ":", ["a", "b", "c"]),
        ("$apr1$s$h", "$", ["", "apr1", "s", "h"]),
    ],
)
def test_java_split(text: str, separator: str, fields: list[str]) -> None:
    assert java_split(text, separator) == fields


# -- the password file -----------------------------------------------------------------------


def test_htpasswd_file_is_read_as_pulsar_reads_it() -> None:
    data = (
        b"superUser:mQQQIsyvvKRtU\r\n"
        b"superUser2:$apr1$foobarmq$kuSZlLgOITksCkRgl57ie/\n"
        b"client1:$apr1$GiGKS2JU$N6soC.W2fIQ/oPVej37cM.\r"
        b"client1:abNANd1rDfiNc"  # listed twice: the later line wins; no final line break
    )
    assert parse_htpasswd(data) == {
        "superUser": "mQQQIsyvvKRtU",
        "superUser2": "$apr1$foobarmq$kuSZlLgOITksCkRgl57ie/",
        "client1": "abNANd1rDfiNc",
    }
    assert parse_htpasswd(b"") == {}
    assert parse_htpasswd(b"a:b\n") == {"a": "b"}


@pytest.mark.parametrize(
    "data",
    [
        b"a:b\n\nc:d\n",  # a blank line
        b"# users\na:b\n",  # a comment
        b"a:\n",  # no hash
        b"a:b:c\n",  # a third field
        b"a:b\n\n",  # a blank last line
    ],
)
def test_htpasswd_lines_other_than_user_hash_refuse_the_file(data: bytes) -> None:
    with pytest.raises(ValueError, match="format of the password auth conf file is invalid"):
        parse_htpasswd(data)


HTPASSWD = b"admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\napp:abNANd1rDfiNc\n"


def test_the_conf_is_a_path_a_url_or_base64(tmp_path: Path) -> None:
    """``AuthenticationProviderBasic.readData``: a file path, ``file:``, ``data:`` or the
    content in base64."""
    path = tmp_path / ".htpasswd"
    path.write_bytes(HTPASSWD)
    encoded = base64.b64encode(HTPASSWD).decode()
    for conf in (str(path), path.as_uri(), "data:;base64," + encoded, encoded):
        provider = AuthenticationProviderBasic.from_settings(conf)
        assert set(provider.users) == {"admin", "app"}
        assert provider.authenticate("admin", "123456").role == "admin"
        assert provider.authenticate("app", "secret").role == "app"


def test_the_conf_is_required_and_must_parse(tmp_path: Path) -> None:
    for conf in (None, "", "  "):
        with pytest.raises(ValueError, match="No basic authentication config provided"):
            AuthenticationProviderBasic.from_settings(conf)
    with pytest.raises(ValueError, match="basic_auth_conf"):
        AuthenticationProviderBasic.from_settings(str(tmp_path / "missing") + "!")
    bad = tmp_path / "bad"
    bad.write_bytes(b"admin\n")
    with pytest.raises(ValueError, match="password auth conf file is invalid"):
        AuthenticationProviderBasic.from_settings(str(bad))


# -- credentials -----------------------------------------------------------------------------


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_basic_header() -> None:
    assert basic_credentials(basic("admin:123456")) == ("admin", "123456")
    assert basic_credentials("basic YWRtaW46MTIzNDU2") == ("admin", "123456")  # any case
    assert basic_credentials("Basic YWRtaW46MTIzNDU") == ("admin", "12345")  # no padding
    assert basic_credentials(basic(":pw")) == ("", "pw")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, 'has to be started with "Basic "'),
        ("", 'has to be started with "Basic "'),
        ("Bearer abc", 'has to be started with "Basic "'),
        ("Basic", 'has to be started with "Basic "'),
        ("Basic a b", "Base64 encoded token is not found"),
        ("Basic !!!!", "Base64 decoding is failure"),
        ("Basic YWRtaW46MTIzNDU2=====", "Base64 decoding is failure"),
        ("Basic Y", "Base64 decoding is failure"),
        (basic("admin"), "Base64 decoded params are invalid"),
        (basic("admin:"), "Base64 decoded params are invalid"),
        (basic("admin:pass:word"), "Base64 decoded params are invalid"),
    ],
)
def test_bad_basic_headers(header: str | None, message: str) -> None:
    with pytest.raises(AuthenticationError, match=message):
        basic_credentials(header)


# -- several providers and the anonymous role ------------------------------------------------


def service(anonymous: str | None = "anonymous") -> AuthenticationService:
    return AuthenticationService(
        AuthenticationProviderTls(),
        AuthenticationProviderToken(secret_key=SECRET),
        AuthenticationProviderBasic(parse_htpasswd(HTPASSWD)),
        anonymous_role=anonymous,
    )


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, algorithm="HS256")


def test_connect_picks_the_provider_by_method_and_refuses_wrong_credentials() -> None:
    """``ServerCnx.handleConnect``: the method's provider alone decides; a method without
    a provider gets the anonymous role."""
    auth = service()
    assert auth.authenticate_command("basic", b"admin:123456").role == "admin"
    assert auth.authenticate_command("basic", b"app:secret").role == "app"
    assert auth.authenticate_command("token", token("app").encode()).role == "app"
    assert auth.authenticate_command("tls", b"", "cert-role").role == "cert-role"
    for method, data in [
        ("basic", b"admin:wrong"),
        ("basic", b"nobody:123456"),
        ("basic", b"admin"),
        ("token", b"not-a-token"),
        ("tls", b""),  # no certificate
    ]:
        with pytest.raises(AuthenticationError):
            auth.authenticate_command(method, data)
    for method in ("", "none", "unknown"):
        assert auth.authenticate_command(method, b"admin:wrong").role == "anonymous"
    with pytest.raises(AuthenticationError, match="No anonymous role"):
        service(anonymous=None).authenticate_command("", b"")


def test_http_names_its_method_or_is_tried_against_every_provider() -> None:
    """``AuthenticationService.authenticateHttpRequest``."""
    auth = service()
    assert auth.authenticate_http(basic("admin:123456")).role == "admin"
    assert auth.authenticate_http(basic("admin:123456"), method="basic").role == "admin"
    assert auth.authenticate_http(f"Bearer {token('app')}").role == "app"
    assert auth.authenticate_http(None, "cert-role").role == "cert-role"
    # no credentials, or none a provider accepts, and no method named: anonymous
    assert auth.authenticate_http(None).role == "anonymous"
    assert auth.authenticate_http(basic("admin:wrong")).role == "anonymous"
    # a wrong password with the cert: the TLS provider accepts the request
    assert auth.authenticate_http(basic("admin:wrong"), "cert-role").role == "cert-role"
    # the method named: its provider decides, refusals stand
    with pytest.raises(AuthenticationError, match="Unknown user or invalid password"):
        auth.authenticate_http(basic("admin:wrong"), method="basic")
    with pytest.raises(AuthenticationError, match="Unsupported authentication method"):
        auth.authenticate_http(basic("admin:123456"), method="unknown")
    # without an anonymous role, nothing accepted is a refusal
    with pytest.raises(AuthenticationError, match="Authentication required"):
        service(anonymous=None).authenticate_http(basic("admin:wrong"))
    with pytest.raises(AuthenticationError, match="Authentication required"):
        service(anonymous=None).authenticate_http(None)


def test_providers_from_settings(tmp_path: Path) -> None:
    path = tmp_path / ".htpasswd"
    path.write_bytes(HTPASSWD)
    auth = AuthenticationService.from_settings(
        enabled=True,
        secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        providers=("tls", "token", "basic"),
        basic_auth_conf=str(path),
        anonymous_role="anonymous",
    )
    assert sorted(auth.providers) == ["basic", "tls", "token"]
    assert auth.anonymous_role == "anonymous"
    with pytest.raises(ValueError, match="basic_auth_conf"):
        AuthenticationService.from_settings(enabled=True, providers=("basic",))
    off = AuthenticationService.from_settings(enabled=False, anonymous_role="anonymous")
    assert not off.enabled


def test_config_flags_and_environment(tmp_path: Path) -> None:
    config = parse_config(
        [
            "--authentication-enabled",
            "true",
            "--authentication-providers",
            "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
            "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
            "--anonymous-user-role",
            "anonymous",
        ],
        {"PULSAR_GATEWAY_BASIC_AUTH_CONF": "/pulsar/test-conf/.htpasswd"},
    )
    assert config.authentication_providers == ("token", "basic")
    assert config.anonymous_user_role == "anonymous"
    assert config.basic_auth_conf == "/pulsar/test-conf/.htpasswd"
    assert parse_config(["--authentication-providers", "basic"], {}).authentication_providers == (
        "basic",
    )
    defaults = GatewayConfig()
    assert defaults.anonymous_user_role is None and defaults.basic_auth_conf is None
    # a blank role is none (StringUtils.isNotBlank)
    assert GatewayConfig(anonymous_user_role="  ").anonymous_user_role is None
    with pytest.raises(ValueError, match="basic needs basic_auth_conf"):
        GatewayConfig(authentication_enabled=True, authentication_providers=("basic",))
    with pytest.raises(SystemExit):
        parse_config(["--authentication-providers", "digest"], {})


# -- the CONNECT handshake -------------------------------------------------------------------


def connect_frame(method: str | None, data: bytes) -> bytes:
    fields = {} if method is None else {"auth_method_name": method}
    cmd = command(T.CONNECT, client_version="test", protocol_version=20, **fields)
    cmd.connect.auth_data = data
    return frame_codec.encode_command(cmd)


def answers(conn: ServerConnection) -> list[pb.BaseCommand]:
    decoder = frame_codec.FrameDecoder(1 << 20)
    decoder.feed(conn.data_to_send())
    frames = []
    while (f := decoder.next_frame()) is not None:
        frames.append(f.command)
    return frames


def test_connect_with_a_wrong_password_is_refused_with_pulsars_message() -> None:
    """``ServerCnx.authenticationFailed``: ERROR(-1, AuthenticationError, "Failed to
    authenticate") and the connection closes; never the anonymous role."""
    conn = ServerConnection(authenticate=service().authenticate_command)
    conn.receive_data(connect_frame("basic", b"admin:wrong"))
    [error] = answers(conn)
    assert error.type == T.ERROR
    assert error.error.request_id == (1 << 64) - 1  # -1 as the uint64 it travels as
    assert error.error.error == pb.AuthenticationError
    assert error.error.message == "Failed to authenticate"
    assert conn.state is ConnectionState.CLOSED
    assert conn.authenticated is None


def test_connect_without_credentials_gets_the_anonymous_role() -> None:
    for method in (None, "none"):
        conn = ServerConnection(authenticate=service().authenticate_command)
        conn.receive_data(connect_frame(method, b""))
        assert [c.type for c in answers(conn)] == [T.CONNECTED]
        assert conn.authenticated is not None
        assert conn.authenticated.role == "anonymous"
        assert conn.authenticated.expires_at is None  # nothing to refresh
    conn = ServerConnection(authenticate=service().authenticate_command)
    conn.receive_data(connect_frame("basic", b"admin:123456"))
    assert [c.type for c in answers(conn)] == [T.CONNECTED]
    assert conn.authenticated is not None and conn.authenticated.role == "admin"
