"""TLS to model servers: verified against the system's CAs or `SSL_CERT_FILE`, with one
context for the whole process.

A real TLS server on a socket, with a certificate from a CA made here: unknown to the
system's store (refused), trusted once `SSL_CERT_FILE` names it (accepted).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from toolrelay.adapters.http import tls_context
from toolrelay.adapters.models import OpenAIChat, Retry
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError

from .conftest import read_all

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
ANSWER = b'data: {"ok":true}\n\ndata: [DONE]\n\n'


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("toolrelay test CA"))
        .issuer_name(_name("toolrelay test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture
def fresh_context() -> Iterator[None]:
    """`tls_context` is made once per process: each test here starts without one."""
    tls_context.cache_clear()
    yield
    tls_context.cache_clear()


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """An HTTPS model server answering every request with a short stream: (base url, CA)."""
    ca, cert, key = _certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(ANSWER)}\r\n\r\n".encode()
                + ANSWER
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the refused handshake: the client hung up
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"https://127.0.0.1:{port}", ca


@pytest.mark.anyio
async def test_an_unknown_certificate_authority_is_refused(
    tls_server: tuple[str, Path], fresh_context: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    base, _ = tls_server
    client = OpenAIChat(base_url=base, model="m", http=HTTPOptions(retry=Retry(attempts=1)))
    with pytest.raises(ProviderError, match="(?i)certificate"):
        await client.open(REQUEST)
    await client.aclose()


@pytest.mark.anyio
async def test_ssl_cert_file_is_honoured(
    tls_server: tuple[str, Path], fresh_context: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, ca = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    client = OpenAIChat(base_url=base, model="m")
    assert await read_all(await client.open(REQUEST)) == ANSWER
    await client.aclose()


@pytest.mark.anyio
async def test_every_client_shares_one_context(
    tls_server: tuple[str, Path], fresh_context: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a CA bundle costs tens of ms with the loop stopped: made once per process."""
    base, ca = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    made: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        context = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counted)
    clients = [OpenAIChat(base_url=base, model="m") for _ in range(3)]  # three model servers
    for client in clients:
        assert await read_all(await client.open(REQUEST)) == ANSWER
        await client.aclose()
    assert len(made) == 1
