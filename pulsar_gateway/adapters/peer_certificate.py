"""Who a TLS connection's client certificate names, for ``AuthenticationProviderTls``.

The listener's TLS context verified the certificate against the trusted CAs during the
handshake (:mod:`pulsar_gateway.server.tls`); ``ssl`` then gives its subject as
``getpeercert()`` decodes it, and an empty dict for a certificate it did not verify or
did not ask for. Pulsar's role is the subject's common name.
"""

from __future__ import annotations

__all__ = ["certificate_role"]


def certificate_role(peercert: object) -> str | None:
    """The common name of a verified client certificate (``transport.get_extra_info
    ("peercert")``), None without one."""
    if not isinstance(peercert, dict):
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and isinstance(value, str) and value:
                return value
    return None
