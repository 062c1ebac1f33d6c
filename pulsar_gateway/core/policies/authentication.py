"""Token authentication (JWT), as Pulsar's ``AuthenticationProviderToken`` does it, and
TLS client-certificate authentication, as ``AuthenticationProviderTls``; no I/O.

Theory of operation. A client proves its role with a JSON Web Token signed by the operator:

* binary protocol: ``CommandConnect.auth_method_name = "token"`` and ``auth_data`` = the
  token itself, no prefix (``lib/auth/AuthToken.cc`` in apache/pulsar-client-cpp;
  docs/binary_protocol.md "Handshake and authentication");
* HTTP: ``Authorization: Bearer <token>`` (RFC 6750 section 2.1); the WebSocket API also
  takes the ``token`` query parameter, for browsers that cannot set headers (Pulsar's
  ``WebSocketHttpServletRequestWrapper``).

The gateway validates the signature with one configured key, like the broker:

* ``tokenSecretKey``: an HMAC secret, tokens signed HS256 (or HS384/HS512 when the key is
  long enough for them: jjwt refuses an HMAC key shorter than the algorithm's hash, and so
  do we, which also keeps PyJWT from warning about short keys);
* ``tokenPublicKey``: an RSA public key (RS256/384/512, PS256/384/512) or an EC public key
  (the one ES algorithm of its curve), DER (what ``pulsar tokens create-key-pair`` writes)
  or PEM.

Only algorithms of the configured key's family are accepted: a token whose header says
``none``, or HS256 when the key is an RSA public key (the classic confusion attack), is
refused before any signature check. ``exp`` and ``nbf`` are honoured with no leeway (jjwt's
default); ``iat`` and ``aud`` are not checked, as Pulsar does not check them unless
``tokenAudienceClaim`` is configured (which this gateway does not offer). The role is the
``sub`` claim or the configured ``tokenAuthClaim``; a claim holding a list gives its first
string, as ``AuthenticationProviderToken.getPrincipal`` does.

Keys are given as Pulsar's ``AuthTokenUtils.readKeyFromUrl`` reads them: ``file:///path``,
``data:;base64,<base64>``, a path to an existing file, or the base64-encoded key itself.

TLS authentication: the client presents a certificate in the TLS handshake, which the
listener verifies against the trusted CAs (``tlsTrustCertsFilePath``); the role is the
certificate subject's common name (``AuthenticationProviderTls``). The binary client says
``auth_method_name = "tls"``; over HTTP a request without an ``Authorization`` header is
authenticated by its connection's certificate. The adapters read the common name from the
connection and hand it here: this module sees no sockets.

Basic authentication, as ``AuthenticationProviderBasic``: users and password hashes from an
htpasswd-style file (``basicAuthConf``, read at start: a path, ``file:``/``data:`` URL or the
content in base64, as ``AuthenticationProviderBasic.readData``; the hashes in
:mod:`.htpasswd`). The binary client says ``auth_method_name = "basic"`` with ``auth_data``
``user:password``; over HTTP it sends ``Authorization: Basic base64(user:password)``. Either
must split at ``:`` into exactly two fields (so a password holds no ``:``), as Pulsar's
``AuthParams`` requires.

Several providers at once, and the anonymous role, as Pulsar's ``AuthenticationService``:

* binary protocol (``ServerCnx.handleConnect``): the CONNECT's ``auth_method_name`` picks
  the provider, and that provider alone decides; a method with no provider (none given,
  ``none``, an unknown name) gets ``anonymousUserRole`` when one is configured, else is
  refused. Wrong credentials for a configured method are refused, never made anonymous.
* HTTP (``AuthenticationService.authenticateHttpRequest``): a request naming its method
  in ``X-Pulsar-Auth-Method-Name`` (as the Java client does) is decided by that provider
  alone, and an unknown name is refused. A request naming none is tried against every
  provider; the first that accepts it gives the role, and when none does the request gets
  ``anonymousUserRole`` if configured, else 401. So there, as in Pulsar, credentials no
  provider accepts count as none. Pulsar tries its providers in its ``HashMap``'s order
  (TLS, basic, token); here the provider the ``Authorization`` header's scheme names goes
  first (``Bearer``: token, ``Basic``: basic), then that order, so a request with a valid
  token and a verified client certificate gets the token's role where Pulsar would give the
  certificate's.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from pulsar_gateway.core.errors import AuthenticationError
from pulsar_gateway.core.policies.htpasswd import check_password, java_split, parse_htpasswd

__all__ = [
    "AUTHENTICATION_PROVIDERS",
    "AUTH_METHOD_BASIC",
    "AUTH_METHOD_TLS",
    "AUTH_METHOD_TOKEN",
    "AuthenticatedRole",
    "AuthenticationProvider",
    "AuthenticationProviderBasic",
    "AuthenticationProviderTls",
    "AuthenticationProviderToken",
    "AuthenticationService",
    "basic_credentials",
    "bearer_token",
    "read_key",
]

#: ``CommandConnect.auth_method_name`` of token authentication (``getAuthMethodName``).
AUTH_METHOD_TOKEN: Final = "token"
#: ... and of TLS client-certificate authentication.
AUTH_METHOD_TLS: Final = "tls"
#: ... and of basic authentication (user and password).
AUTH_METHOD_BASIC: Final = "basic"

#: The providers the gateway has, by their short name and by Pulsar's class name (what
#: ``authenticationProviders`` lists in broker.conf).
AUTHENTICATION_PROVIDERS: Final = {
    AUTH_METHOD_TOKEN: AUTH_METHOD_TOKEN,
    AUTH_METHOD_TLS: AUTH_METHOD_TLS,
    AUTH_METHOD_BASIC: AUTH_METHOD_BASIC,
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": AUTH_METHOD_TOKEN,
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": AUTH_METHOD_TLS,
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": AUTH_METHOD_BASIC,
}

#: The order Pulsar's ``AuthenticationService`` tries its providers in for an HTTP request
#: that names no method: its ``HashMap``'s, by the methods' hash codes.
_HTTP_ORDER: Final = (AUTH_METHOD_TLS, AUTH_METHOD_BASIC, AUTH_METHOD_TOKEN)

#: The ``Authorization`` header prefix (``HTTP_HEADER_VALUE_PREFIX``).
_BEARER: Final = "Bearer "
#: ... of basic credentials, compared upper-cased (``AuthParams``).
_BASIC: Final = "BASIC "
#: Java's basic Base64 alphabet; the padding is optional (``Base64.getDecoder``).
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")

#: HMAC algorithms and the shortest key jjwt accepts for each (the hash length, RFC 7518
#: section 3.2).
_HMAC_MIN_BYTES: Final = {"HS256": 32, "HS384": 48, "HS512": 64}
_RSA_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
#: jjwt refuses RSA keys below 2048 bits for every RS/PS algorithm.
_RSA_MIN_BITS: Final = 2048
_EC_ALGORITHMS: Final = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}

#: Claims PyJWT would check that jjwt (with Pulsar's settings) does not: ``iat`` (jjwt
#: ignores it), ``aud`` (only with ``tokenAudienceClaim``), ``sub`` (the role claim is read
#: below, and may be a list).
_DECODE_OPTIONS: Final[jwt.types.Options] = {
    "verify_signature": True,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
}


@dataclass(frozen=True, slots=True)
class AuthenticatedRole:
    """Who a validated token speaks for.

    Attributes:
        role: The role (Pulsar's principal) authorization checks use.
        expires_at: The token's ``exp`` (seconds since the epoch), None when it has none.
    """

    role: str
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def read_key(value: str) -> bytes:
    """The bytes of a key setting (``AuthTokenUtils.readKeyFromUrl``).

    Args:
        value: ``file:///path``, ``data:[<media type>][;base64],<data>``, a path to an
            existing file, or the key in base64.

    Returns:
        The key's bytes (for a public key: its DER or PEM encoding).

    Raises:
        ValueError: The value is none of those, or the file cannot be read.
    """
    if value.startswith("data:"):
        header, comma, data = value[len("data:") :].partition(",")
        if not comma:
            raise ValueError("a data: URL needs a ',' before its data")
        if header.endswith(";base64"):
            return _b64decode(data)
        return urllib.parse.unquote_to_bytes(data)
    if value.startswith("file:"):
        path = urllib.request.url2pathname(urllib.parse.urlparse(value).path)
        return _read_file(path)
    if os.path.isfile(value):
        return _read_file(value)
    return _b64decode(value)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"cannot read key file {path!r}: {exc.strerror}") from None


def _b64decode(text: str) -> bytes:
    compact = "".join(text.split())
    try:
        if "-" in compact or "_" in compact:
            return base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "not a file:// or data: URL, not an existing file, and not base64"
        ) from None


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value.

    Raises:
        AuthenticationError: The header is missing, is not a bearer token, or is blank.
    """
    if authorization is None or not authorization.startswith(_BEARER):
        raise AuthenticationError("Invalid HTTP Authorization header")
    return authorization[len(_BEARER) :]


def basic_credentials(authorization: str | None) -> tuple[str, str]:
    """The user and password of an ``Authorization: Basic base64(user:password)`` header
    value, parsed as ``AuthenticationProviderBasic.AuthParams`` parses it (scheme in any
    case, one space, Base64 with or without padding).

    Raises:
        AuthenticationError: No header, another scheme, not ``Basic <base64>``, bad Base64,
            or decoded text that is not ``user:password``.
    """
    if authorization is None or not authorization.strip():
        raise AuthenticationError('Authentication token has to be started with "Basic "')
    if not authorization.upper().startswith(_BASIC):
        raise AuthenticationError('Authentication token has to be started with "Basic "')
    fields = java_split(authorization, " ")
    if len(fields) != 2:
        raise AuthenticationError("Base64 encoded token is not found")
    encoded = fields[1]
    if not _BASE64.fullmatch(encoded) or len(encoded.rstrip("=")) % 4 == 1:
        raise AuthenticationError("Base64 decoding is failure: not Base64")
    data = base64.b64decode(encoded.rstrip("=") + "=" * (-len(encoded.rstrip("=")) % 4))
    return _user_password(data)


def _user_password(data: bytes) -> tuple[str, str]:
    """``user:password`` (Pulsar reads the bytes as UTF-8, replacing what is not, and needs
    exactly two fields from ``String.split(":")``)."""
    fields = java_split(data.decode("utf-8", errors="replace"), ":")
    if len(fields) != 2:
        raise AuthenticationError("Base64 decoded params are invalid")
    return fields[0], fields[1]


class AuthenticationProvider(Protocol):
    """One of Pulsar's ``AuthenticationProvider``: credentials of its method -> role."""

    @property
    def method(self) -> str:
        """Its ``getAuthMethodName``: what CONNECT's ``auth_method_name`` and the
        ``X-Pulsar-Auth-Method-Name`` header say to pick it."""
        ...

    def authenticate_command(
        self, auth_data: bytes, certificate_role: str | None
    ) -> AuthenticatedRole:
        """A binary CONNECT's (or AUTH_RESPONSE's) ``auth_data``; ``certificate_role``: the
        connection's verified certificate's common name, None without one.

        Raises:
            AuthenticationError: The credentials are not valid.
        """
        ...

    def authenticate_http(
        self, authorization: str | None, certificate_role: str | None
    ) -> AuthenticatedRole:
        """An HTTP request's ``Authorization`` header value (None without one), and its
        connection's verified certificate's common name.

        Raises:
            AuthenticationError: The credentials are not valid.
        """
        ...


class AuthenticationProviderToken:
    """Validates tokens with one key; the role comes from one claim."""

    def __init__(
        self,
        *,
        secret_key: bytes | None = None,
        public_key: bytes | None = None,
        role_claim: str = "sub",
    ) -> None:
        """Exactly one of ``secret_key`` (HMAC) or ``public_key`` (DER or PEM) is used; the
        secret wins when both are given, as in Pulsar.

        Raises:
            ValueError: No key, a secret shorter than 32 bytes, an unreadable public key, or
                a public key of an unsupported type or size.
        """
        self.role_claim = role_claim
        self._key: Any
        if secret_key is not None:
            self._key = secret_key
            self.algorithms = [a for a, n in _HMAC_MIN_BYTES.items() if len(secret_key) >= n]
            if not self.algorithms:
                raise ValueError(
                    f"the token secret key has {len(secret_key)} bytes; HS256 needs at least "
                    f"{_HMAC_MIN_BYTES['HS256']} (256 bits), as jjwt requires"
                )
        elif public_key is not None:
            self._key, self.algorithms = _load_public_key(public_key)
        else:
            raise ValueError("token authentication needs a secret key or a public key")

    @property
    def method(self) -> str:
        return AUTH_METHOD_TOKEN

    @classmethod
    def from_settings(
        cls, *, secret_key: str | None, public_key: str | None, role_claim: str = "sub"
    ) -> AuthenticationProviderToken:
        """The provider Pulsar's ``tokenSecretKey`` / ``tokenPublicKey`` / ``tokenAuthClaim``
        settings describe (key settings as :func:`read_key` reads them).

        Raises:
            ValueError: As :meth:`__init__`, or a key setting cannot be read.
        """
        if secret_key is not None:
            return cls(secret_key=read_key(secret_key), role_claim=role_claim)
        if public_key is not None:
            return cls(public_key=read_key(public_key), role_claim=role_claim)
        raise ValueError(
            "authentication_enabled needs token_secret_key or token_public_key "
            "(--token-secret-key / --token-public-key)"
        )

    def authenticate(self, token: str) -> AuthenticatedRole:
        """Validate ``token`` and return its role.

        Raises:
            AuthenticationError: Blank, malformed, signed with another key or another
                algorithm family, expired, not yet valid, or without the role claim.
        """
        if not token.strip():
            raise AuthenticationError("Blank token found")
        try:
            claims = jwt.decode(
                token, self._key, algorithms=self.algorithms, options=_DECODE_OPTIONS
            )
        except jwt.PyJWTError as exc:
            # Pulsar's wording, kept so operators can grep for it.
            raise AuthenticationError(f"Failed to authentication token: {exc}") from None
        except (ValueError, TypeError) as unwrapped:  # anything PyJWT did not wrap
            raise AuthenticationError(f"Failed to authentication token: {unwrapped}") from None
        role = _role(claims.get(self.role_claim))
        if role is None:
            raise AuthenticationError(f"The token has no '{self.role_claim}' claim with a role")
        exp = claims.get("exp")
        expires_at = float(exp) if isinstance(exp, int | float) else None
        return AuthenticatedRole(role, expires_at)

    def authenticate_command(
        self, auth_data: bytes, certificate_role: str | None
    ) -> AuthenticatedRole:
        try:
            token = auth_data.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("The token is not UTF-8") from None
        return self.authenticate(token)

    def authenticate_http(
        self, authorization: str | None, certificate_role: str | None
    ) -> AuthenticatedRole:
        return self.authenticate(bearer_token(authorization))


def _role(value: object) -> str | None:
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str) and value:
        return value
    return None


def _load_public_key(data: bytes) -> tuple[Any, list[str]]:
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            key = load_pem_public_key(data)
        else:
            key = load_der_public_key(data)
    except ValueError as exc:
        raise ValueError(f"cannot decode the token public key (DER or PEM): {exc}") from None
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < _RSA_MIN_BITS:
            raise ValueError(
                f"the token public key is {key.key_size}-bit RSA; at least "
                f"{_RSA_MIN_BITS} bits are needed"
            )
        return key, list(_RSA_ALGORITHMS)
    if isinstance(key, ec.EllipticCurvePublicKey):
        algorithm = _EC_ALGORITHMS.get(key.curve.name)
        if algorithm is None:
            raise ValueError(f"the token public key's curve {key.curve.name} has no JWT algorithm")
        return key, [algorithm]
    raise ValueError(f"the token public key must be RSA or EC, got {type(key).__name__}")


class AuthenticationProviderTls:
    """The role is the common name of the client certificate the TLS handshake verified."""

    @property
    def method(self) -> str:
        return AUTH_METHOD_TLS

    def authenticate(self, certificate_role: str | None) -> AuthenticatedRole:
        """``certificate_role``: the verified certificate's common name, None when the
        connection has no verified certificate (plain, or none presented).

        Raises:
            AuthenticationError: No verified certificate, or one without a common name.
        """
        if not certificate_role:
            # Pulsar's wording (AuthenticationProviderTls.authenticate)
            raise AuthenticationError("Client unable to authenticate with TLS certificate")
        return AuthenticatedRole(certificate_role, None)

    def authenticate_command(
        self, auth_data: bytes, certificate_role: str | None
    ) -> AuthenticatedRole:
        return self.authenticate(certificate_role)

    def authenticate_http(
        self, authorization: str | None, certificate_role: str | None
    ) -> AuthenticatedRole:
        return self.authenticate(certificate_role)


class AuthenticationProviderBasic:
    """Users and password hashes from an htpasswd-style file (:mod:`.htpasswd`)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        """``users``: user -> stored hash."""
        self.users = dict(users)

    @classmethod
    def from_settings(cls, conf: str | None) -> AuthenticationProviderBasic:
        """The provider of Pulsar's ``basicAuthConf``: a path, a ``file:`` or ``data:``
        URL, or the file's content in base64 (read as :func:`read_key` reads keys, which
        is the order ``AuthenticationProviderBasic.readData`` tries).

        Raises:
            ValueError: No setting, it cannot be read, or the file is not ``user:hash``
                lines.
        """
        if conf is None or not conf.strip():
            raise ValueError(
                "authentication_providers: basic needs basic_auth_conf (--basic-auth-conf): "
                "No basic authentication config provided"
            )
        try:
            return cls(parse_htpasswd(read_key(conf)))
        except ValueError as exc:
            raise ValueError(f"basic_auth_conf: {exc}") from None

    @property
    def method(self) -> str:
        return AUTH_METHOD_BASIC

    def authenticate(self, user: str, password: str) -> AuthenticatedRole:
        """The role is the user's name.

        Raises:
            AuthenticationError: An unknown user, or a password its hash does not match
                (one message for both, Pulsar's).
        """
        stored = self.users.get(user)
        if stored is None or not check_password(stored, password):
            raise AuthenticationError("Unknown user or invalid password")
        return AuthenticatedRole(user, None)

    def authenticate_command(
        self, auth_data: bytes, certificate_role: str | None
    ) -> AuthenticatedRole:
        return self.authenticate(*_user_password(auth_data))

    def authenticate_http(
        self, authorization: str | None, certificate_role: str | None
    ) -> AuthenticatedRole:
        return self.authenticate(*basic_credentials(authorization))


class AuthenticationService:
    """Pulsar's ``AuthenticationService``: the configured providers by method name, and
    the anonymous role (module docstring). No provider means authentication is off:
    nothing is asked of clients."""

    def __init__(
        self, *providers: AuthenticationProvider, anonymous_role: str | None = None
    ) -> None:
        """``anonymous_role``: Pulsar's ``anonymousUserRole``, given to clients that
        present no credentials a provider is configured for (None: they are refused)."""
        self.providers: dict[str, AuthenticationProvider] = {p.method: p for p in providers}
        self.anonymous_role = anonymous_role

    @classmethod
    def from_settings(
        cls,
        *,
        enabled: bool,
        secret_key: str | None = None,
        public_key: str | None = None,
        role_claim: str = "sub",
        providers: tuple[str, ...] = (AUTH_METHOD_TOKEN,),
        basic_auth_conf: str | None = None,
        anonymous_role: str | None = None,
    ) -> AuthenticationService:
        """``providers``: short names (``token``, ``tls``, ``basic``).

        Raises:
            ValueError: authentication is enabled with the token provider and no usable
                key, or with the basic provider and no usable password file.
        """
        if not enabled:
            return cls()
        built: list[AuthenticationProvider] = []
        if AUTH_METHOD_TOKEN in providers:
            built.append(
                AuthenticationProviderToken.from_settings(
                    secret_key=secret_key, public_key=public_key, role_claim=role_claim
                )
            )
        if AUTH_METHOD_TLS in providers:
            built.append(AuthenticationProviderTls())
        if AUTH_METHOD_BASIC in providers:
            built.append(AuthenticationProviderBasic.from_settings(basic_auth_conf))
        return cls(*built, anonymous_role=anonymous_role)

    @property
    def enabled(self) -> bool:
        return bool(self.providers)

    def authenticate_command(
        self, auth_method_name: str, auth_data: bytes, certificate_role: str | None = None
    ) -> AuthenticatedRole:
        """Authenticate a binary connection's CONNECT (or AUTH_RESPONSE) credentials;
        ``certificate_role``: the common name of the connection's verified client
        certificate, None without one.

        Raises:
            AuthenticationError: Authentication is on and the credentials are not valid for
                their method's provider, or their method has no provider and there is no
                anonymous role (``ServerCnx.handleConnect``).
        """
        if not self.enabled:
            raise AuthenticationError("authentication is not enabled")
        provider = self.providers.get(auth_method_name)
        if provider is None:
            if self.anonymous_role is not None:
                return AuthenticatedRole(self.anonymous_role, None)
            raise AuthenticationError(
                f"No anonymous role, and no authentication provider for {auth_method_name!r}"
            )
        return provider.authenticate_command(auth_data, certificate_role)

    def authenticate_http(
        self,
        authorization: str | None,
        certificate_role: str | None = None,
        method: str | None = None,
    ) -> AuthenticatedRole:
        """Authenticate an HTTP request (``authenticateHttpRequest``).

        Args:
            authorization: Its ``Authorization`` header value, None without one.
            certificate_role: Its connection's verified client certificate's common name.
            method: Its ``X-Pulsar-Auth-Method-Name`` header, None without one.

        Raises:
            AuthenticationError: The named method has no provider or refuses the
                credentials; or no method is named, no provider accepts the request, and
                there is no anonymous role.
        """
        if not self.enabled:
            raise AuthenticationError("authentication is not enabled")
        if method is not None:
            provider = self.providers.get(method)
            if provider is None:
                raise AuthenticationError(f"Unsupported authentication method: [{method}].")
            return provider.authenticate_http(authorization, certificate_role)
        refusals: list[str] = []
        for provider in self._http_order(authorization):
            try:
                return provider.authenticate_http(authorization, certificate_role)
            except AuthenticationError as exc:
                refusals.append(f"{provider.method}: {exc}")
        if self.anonymous_role is not None:
            return AuthenticatedRole(self.anonymous_role, None)
        raise AuthenticationError("Authentication required (" + "; ".join(refusals) + ")")

    def _http_order(self, authorization: str | None) -> list[AuthenticationProvider]:
        first = None
        if authorization is not None and authorization.startswith(_BEARER):
            first = AUTH_METHOD_TOKEN
        elif authorization is not None and authorization.upper().startswith(_BASIC):
            first = AUTH_METHOD_BASIC
        names = sorted(self.providers, key=lambda m: (m != first, _HTTP_ORDER.index(m)))
        return [self.providers[name] for name in names]
