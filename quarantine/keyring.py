"""The quarantine table's encryption keys, and its encrypted values opened or shown (no engine).

With ``errors.deadletterqueue.encryption.key`` set, the quarantine writer keeps a record's
bytes and every text that may quote them encrypted (:mod:`quarantine.encryption`, in Spark):

* ``key``, ``value`` and each header's ``value``: Spark's ``aes_encrypt`` in GCM mode, as it
  lays the bytes out: a 12-byte IV, the ciphertext, a 16-byte tag; the row's
  ``encryption_key_id`` names the key;
* ``message``, ``stacktrace`` and each ``error_history`` entry's ``message``: the same
  encryption of the text's UTF-8 bytes, written ``encrypted:<key id>:<base64>`` (a later
  failure of the record may be written under a later key, so each text names its own).

A :class:`KeyRing` holds the keys a command can read here: the writing key
(``…encryption.key`` / ``…encryption.key.id``) and the old ones kept for reading
(``…encryption.old.keys``), each resolved from its :class:`~quarantine.secret_reference.SecretReference`.
A key it cannot read (the environment variable not set) is not an error until a command
needs it: the read-only commands show such a value as ``encrypted (N bytes)``
(:meth:`KeyRing.shown_bytes`, :meth:`KeyRing.shown_text`), a run refuses to start
(:meth:`KeyRing.sealing`), a replay refuses before it writes. The few rows a command prints are
opened here in Python (``cryptography``'s AES-GCM, the layout above), whichever engine read them.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from quarantine.errorhandling.settings import ErrorsConfig
from quarantine.errors import ConfigError
from quarantine.secret_reference import SecretReference

__all__ = [
    "AES_KEY_BYTES",
    "GCM_IV_BYTES",
    "GCM_TAG_BYTES",
    "SEALED_TEXT_PREFIX",
    "KeyRing",
    "Sealed",
    "sealed_text_key",
]

#: The AES key sizes Spark's ``aes_encrypt`` takes, in bytes.
AES_KEY_BYTES = (16, 24, 32)
#: Spark's AES-GCM layout: the IV first, the 128-bit tag last.
GCM_IV_BYTES = 12
GCM_TAG_BYTES = 16
#: An encrypted text is ``encrypted:<key id>:<base64 of IV, ciphertext and tag>``.
SEALED_TEXT_PREFIX = "encrypted:"
_SEALED_TEXT = re.compile(r"encrypted:([A-Za-z0-9._-]{1,64}):([A-Za-z0-9+/]*={0,2})")

#: Config keys, as messages name them.
_KEY = "errors.deadletterqueue.encryption.key"
_OLD = "errors.deadletterqueue.encryption.old.keys"


@dataclass(frozen=True)
class Sealed:
    """An encrypted value shown without its key: how many bytes the table holds."""

    size: int

    def __str__(self) -> str:
        return f"encrypted ({self.size:,} bytes)"


def sealed_text_key(text: str) -> str | None:
    """The key id an encrypted text names, or None: ``text`` is not one (see the module doc)."""
    m = _SEALED_TEXT.fullmatch(text)
    return m[1] if m else None


@dataclass(frozen=True)
class KeyRing:
    """The encryption keys a command can read here, by key id.

    Build with :meth:`from_errors` (a config's ``errors`` section) or :meth:`none` (no encryption).

    Attributes:
        writing: the id of the key new rows are written under (None: rows are written as read).
        keys: the AES key of each id this process can read.
        missing: for each configured id it cannot read, why (``the environment variable X is not set``).
        references: where each configured id's key is.
    """

    writing: str | None = None
    keys: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    missing: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    references: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:  # never the keys
        return f"KeyRing(writing={self.writing!r}, readable={sorted(self.keys)}, missing={sorted(self.missing)})"

    @classmethod
    def none(cls) -> KeyRing:
        """No encryption configured."""
        return cls()

    @classmethod
    def from_errors(cls, errors: ErrorsConfig) -> KeyRing:
        """The keys ``errors`` names, each read where it is kept (an unset one goes to :attr:`missing`).

        Raises:
            ConfigError: a key that is set is not 16, 24 or 32 bytes (named by its config key and
                where it is kept, never by its value).
        """
        named: dict[str, tuple[str, str]] = {
            kid: (f"{_OLD}.{kid}", ref) for kid, ref in errors.dlq_encryption_old_keys.items()
        }
        if errors.dlq_encryption_key is not None and errors.dlq_encryption_key_id is not None:
            named[errors.dlq_encryption_key_id] = (_KEY, errors.dlq_encryption_key)
        keys: dict[str, bytes] = {}
        missing: dict[str, str] = {}
        for kid, (config_key, text) in named.items():
            ref = SecretReference.parse(text)
            value = ref.resolve(key=config_key)
            if value is None:
                missing[kid] = ref.unavailable()
                continue
            raw = value.encode("utf-8")
            if len(raw) not in AES_KEY_BYTES:
                raise ConfigError(
                    config_key, str(ref),
                    f"an AES key of 16, 24 or 32 bytes in {ref.describe()}; it holds one of {len(raw)} bytes "
                    "(e.g. 32 characters: openssl rand -base64 24)",
                )
            keys[kid] = raw
        return cls(
            writing=errors.dlq_encryption_key_id if errors.dlq_encryption_key is not None else None,
            keys=MappingProxyType(keys), missing=MappingProxyType(missing),
            references=MappingProxyType({kid: text for kid, (_, text) in named.items()}),
        )

    @property
    def configured(self) -> bool:
        """Whether the config names any key (for writing or for reading)."""
        return bool(self.keys or self.missing)

    def sealing(self) -> tuple[str, bytes] | None:
        """The id and key new rows are written under; None: rows are written as read.

        Raises:
            ConfigError: a writing key is configured and this process cannot read it (a run
                would write rows it cannot encrypt): before anything is read or written.
        """
        if self.writing is None:
            return None
        if self.writing in self.missing:
            raise ConfigError(
                _KEY, self.references.get(self.writing),
                f"a key this process can read: {self.missing[self.writing]}; a run writes the quarantine "
                f"table encrypted under key {self.writing!r}, so it needs it",
            )
        return self.writing, self.keys[self.writing]

    def why_not(self, key_id: str) -> str:
        """Why the rows under ``key_id`` cannot be opened here, in words (``key 'k1', whose … is not set``)."""
        if key_id in self.missing:
            return f"key {key_id!r}, not readable here ({self.missing[key_id]})"
        return (f"key {key_id!r}, which the config does not name ({_KEY}.id, or {_OLD} for a key the table "
                "was written under before)")

    def open_bytes(self, data: bytes | bytearray | None, key_id: str | None) -> bytes | Sealed | None:
        """A stored payload opened: its plaintext when ``key_id`` is None (stored as read) or readable
        here, else :class:`Sealed` (also when the bytes do not open under that key)."""
        if data is None or key_id is None:
            return None if data is None else bytes(data)
        key = self.keys.get(key_id)
        if key is None:
            return Sealed(len(data))
        opened = _open(key, bytes(data))
        return Sealed(len(data)) if opened is None else opened

    def open_text(self, text: str | None) -> str | None:
        """A stored text opened: as it is when not encrypted, its plaintext when its key is readable
        here, else ``encrypted (N bytes)``."""
        if text is None:
            return None
        m = _SEALED_TEXT.fullmatch(text)
        if m is None:
            return text
        try:
            data = base64.b64decode(m[2], validate=True)
        except binascii.Error:
            return text
        key = self.keys.get(m[1])
        opened = None if key is None else _open(key, data)
        if opened is None:
            return str(Sealed(len(data)))
        return opened.decode("utf-8", errors="replace")

    def secret_spellings(self, key_id: str | None = None) -> tuple[str, ...]:
        """Every readable key (or only ``key_id``) as text and as the hex a Spark plan shows it in."""
        out: list[str] = []
        for kid, key in self.keys.items():
            if key_id is None or kid == key_id:
                out += [key.decode("utf-8", errors="replace"), key.hex(), key.hex().upper()]
        return tuple(out)


def _open(key: bytes, data: bytes) -> bytes | None:
    """AES-GCM in Spark's layout, opened; None when it does not open (another key, cut bytes)."""
    if len(data) < GCM_IV_BYTES + GCM_TAG_BYTES:
        return None
    try:
        return AESGCM(key).decrypt(data[:GCM_IV_BYTES], data[GCM_IV_BYTES:], None)
    except InvalidTag:
        return None
