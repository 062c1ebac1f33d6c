"""The TLS context of the gateway's listeners, from Pulsar's TLS settings.

Pulsar's broker takes ``tlsCertificateFilePath``, ``tlsKeyFilePath`` and
``tlsTrustCertsFilePath`` (PEM files) and serves TLS on ``brokerServicePortTls`` (clients'
``pulsar+ssl://``) and ``webServicePortTls`` (``https://``, ``wss://``) beside the plain
ports. One context serves both listeners here.

Client certificates, as Pulsar asks for them:

- ``tlsRequireTrustedClientCertOnConnect``: a client must present a certificate signed by
  one of the trusted CAs, or the handshake fails;
- otherwise, with trusted CAs configured, a certificate is asked for but optional; one
  that the CAs do not sign fails the handshake (Python's ``ssl`` cannot ask for a
  certificate and then ignore a bad one, as Java's ``tlsAllowInsecureConnection`` with a
  trust store can);
- ``tlsAllowInsecureConnection``: no certificate is asked for at all.
"""

from __future__ import annotations

import ssl

from pulsar_gateway.server.config import GatewayConfig

__all__ = ["server_context"]


def server_context(config: GatewayConfig) -> ssl.SSLContext | None:
    """The listeners' TLS context, None when no certificate is configured.

    Raises:
        ValueError: a file cannot be read or is not what its option says (the message
            names the option).
    """
    cert, key = config.tls_certificate_file_path, config.tls_key_file_path
    if cert is None or key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Pulsar's default tlsProtocols
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"tls_certificate_file_path / tls_key_file_path: cannot load {cert} with {key}: {exc}"
        ) from None
    trust = config.tls_trust_certs_file_path
    if trust is not None:
        try:
            context.load_verify_locations(cafile=trust)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"tls_trust_certs_file_path: cannot load {trust}: {exc}") from None
    if config.tls_allow_insecure_connection or trust is None:
        context.verify_mode = ssl.CERT_NONE
    elif config.tls_require_trusted_client_cert_on_connect:
        context.verify_mode = ssl.CERT_REQUIRED
    else:
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
