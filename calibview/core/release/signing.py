"""Ed25519 signatures of inference configs: ``release --sign KEYFILE`` adds one, ``check --trust PUBKEY`` refuses
a config that is unsigned or whose signature does not verify with that public key.

``config_sha256`` detects accidents (a truncated copy, an editor's stray keystroke); anyone who edits a config on
purpose can recompute it. A signature can only be made with the private key, so a config that verifies against
a trusted public key was written by its holder and not changed since. The signed bytes are the canonical JSON
(:func:`calibview.core.release.config.canonical_json`) of the config without its ``signature`` field, which
includes ``config_sha256``; the field is ``{"algorithm": "ed25519", "key_sha256": SHA-256 hex of the raw 32-byte
public key, "value": base64 of the 64-byte signature}``.

Keys are PEM files, as ``cryptography`` and ``openssl`` write them: the private key unencrypted PKCS#8
(``-----BEGIN PRIVATE KEY-----``), the public key SubjectPublicKeyInfo (``-----BEGIN PUBLIC KEY-----``). Make a
pair with ``openssl genpkey -algorithm ed25519 -out release.key && openssl pkey -in release.key -pubout -out
release.pub`` (docs/RELEASE.md). The ``cryptography`` package is optional (``pip install 'calibview[sign]'``) and
imported only here, inside the functions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Mapping

from calibview.core.errors import CalibviewError
from calibview.core.release.config import canonical_json

ALGORITHM = "ed25519"
#: the largest key file read (a PEM Ed25519 key is about 120 bytes)
MAX_KEY_BYTES = 64 << 10


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise CalibviewError("Signing and verifying inference configs needs the cryptography package; install it "
                             "with pip install 'calibview[sign]'.") from None
    return serialization, ed25519


def _key_bytes(path: str, what: str) -> bytes:
    from calibview.core.calibrators.file import read_regular

    hint = "give a PEM file (docs/RELEASE.md shows how to make one)"
    raw = read_regular(path, what, hint)
    if len(raw) > MAX_KEY_BYTES or b"-----BEGIN" not in raw:
        raise CalibviewError(f"{path} is not a PEM key file, so it is not {what}; {hint}.")
    return raw


def load_private_key(path: str):
    """The Ed25519 private key in the PEM file ``path`` (unencrypted PKCS#8); anything else is one sentence."""
    serialization, ed25519 = _crypto()
    raw = _key_bytes(path, "an Ed25519 private key")
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except TypeError:
        raise CalibviewError(f"{path} is an encrypted private key; give an unencrypted PEM key and protect it by the "
                             f"file's permissions instead (docs/RELEASE.md).") from None
    except ValueError:
        raise CalibviewError(f"{path} is not a PEM private key; give the Ed25519 key made as docs/RELEASE.md "
                             f"shows.") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise CalibviewError(f"{path} holds a {type(key).__name__.replace('_', '')}, not an Ed25519 private key; "
                             f"make an Ed25519 key as docs/RELEASE.md shows.")
    return key


def load_public_key(path: str):
    """The Ed25519 public key in the PEM file ``path`` (SubjectPublicKeyInfo); anything else is one sentence."""
    serialization, ed25519 = _crypto()
    raw = _key_bytes(path, "an Ed25519 public key")
    try:
        key = serialization.load_pem_public_key(raw)
    except ValueError:
        hint = (" (it looks like a private key: give the public key, openssl pkey -pubout writes it)"
                if b"PRIVATE KEY" in raw else "")
        raise CalibviewError(f"{path} is not a PEM public key{hint}; give the Ed25519 public key of the release "
                             f"key.") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise CalibviewError(f"{path} holds a {type(key).__name__.replace('_', '')}, not an Ed25519 public key; "
                             f"give the public key of the Ed25519 release key.")
    return key


def key_sha256(public_key) -> str:
    """SHA-256 hex of the raw 32 bytes of ``public_key``: which key signed, without the key itself."""
    serialization, _ = _crypto()
    return hashlib.sha256(public_key.public_bytes(serialization.Encoding.Raw,
                                                  serialization.PublicFormat.Raw)).hexdigest()


def signed_bytes(config: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: the canonical JSON of ``config`` without ``signature``."""
    return canonical_json({k: v for k, v in config.items() if k != "signature"})


def sign(config: Mapping[str, Any], private_key) -> dict:
    """A copy of the sealed ``config`` (``config_sha256`` set) with its ``signature`` by ``private_key``."""
    value = private_key.sign(signed_bytes(config))
    return {**config, "signature": {"algorithm": ALGORITHM, "key_sha256": key_sha256(private_key.public_key()),
                                    "value": base64.b64encode(value).decode("ascii")}}


def verify(config: Mapping[str, Any], public_key, path: str = "the inference config",
           key_path: str = "the trusted key") -> None:
    """Nothing when ``config`` carries a signature by ``public_key`` over its current content; else one sentence
    (unsigned, signed by another key, or changed after it was signed)."""
    from cryptography.exceptions import InvalidSignature

    sig = config.get("signature")
    if not isinstance(sig, Mapping):
        raise CalibviewError(f"{path} is not signed, but --trust {key_path} asks for a signature; release it with "
                             f"--sign, or check it without --trust.")
    try:
        value = base64.b64decode(str(sig.get("value")), validate=True)
    except (binascii.Error, ValueError):
        value = b""
    try:
        if sig.get("algorithm") != ALGORITHM:
            raise InvalidSignature
        public_key.verify(value, signed_bytes(config))
    except InvalidSignature:
        other = sig.get("key_sha256") != key_sha256(public_key)
        why = ("it was signed by another key than the one in " + key_path if other else
               "it was changed after it was signed")
        raise CalibviewError(f"{path}: its signature does not verify with the trusted key in {key_path} ({why}), so "
                             f"it is refused; restore the released file or release it again.") from None


__all__ = ["key_sha256", "load_private_key", "load_public_key", "sign", "signed_bytes", "verify"]
