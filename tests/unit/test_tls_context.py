"""The listeners' TLS context from Pulsar's TLS settings: client certificates asked for as
the settings say, and files that cannot be loaded named by their option."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.tls import server_context
from tests.tlscerts import Authority, CertFiles, make_authority


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authority, CertFiles]:
    authority = make_authority(tmp_path_factory.mktemp("tls"))
    return authority, authority.issue("gateway", server=True)


def config(server: CertFiles, **extra: object) -> GatewayConfig:
    return GatewayConfig(
        tls_certificate_file_path=str(server.cert),
        tls_key_file_path=str(server.key),
        **extra,  # type: ignore[arg-type]
    )


def test_no_certificate_no_context() -> None:
    assert server_context(GatewayConfig()) is None


def test_without_trusted_cas_no_client_certificate_is_asked_for(
    pki: tuple[Authority, CertFiles],
) -> None:
    context = server_context(config(pki[1]))
    assert context is not None
    assert context.verify_mode == ssl.CERT_NONE
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(
    ("extra", "mode"),
    [
        ({}, ssl.CERT_OPTIONAL),
        ({"tls_require_trusted_client_cert_on_connect": True}, ssl.CERT_REQUIRED),
        ({"tls_allow_insecure_connection": True}, ssl.CERT_NONE),
    ],
    ids=["optional", "required", "insecure"],
)
def test_client_certificates_with_trusted_cas(
    pki: tuple[Authority, CertFiles], extra: dict[str, object], mode: ssl.VerifyMode
) -> None:
    authority, server = pki
    context = server_context(
        config(server, tls_trust_certs_file_path=str(authority.cert_path), **extra)
    )
    assert context is not None
    assert context.verify_mode == mode


def test_unreadable_files_are_named(pki: tuple[Authority, CertFiles], tmp_path: Path) -> None:
    authority, server = pki
    missing = tmp_path / "missing.pem"
    with pytest.raises(ValueError, match="tls_certificate_file_path"):
        server_context(
            GatewayConfig(tls_certificate_file_path=str(missing), tls_key_file_path=str(server.key))
        )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(ValueError, match="tls_trust_certs_file_path"):
        server_context(config(server, tls_trust_certs_file_path=str(garbage)))
    # a key that is not the certificate's
    other = authority.issue("someone-else", server=True)
    with pytest.raises(ValueError, match="tls_key_file_path"):
        server_context(
            GatewayConfig(
                tls_certificate_file_path=str(server.cert), tls_key_file_path=str(other.key)
            )
        )
