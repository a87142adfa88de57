"""The one home of secret masking's rules: configs and free text (Spark columns: :mod:`.sinks.redacted_error`).

Everything that shows text to a person — log lines, MLflow params, tags and
artifacts, handler errors, the quarantine table's ``message``, ``stacktrace``
and ``error_history`` — goes through this module. The rules, in the order
:func:`redact_text` applies them:

1. **Configured secret values** (:func:`collect_secrets` of the config), longest
   first, also in their JSON-escaped and ``repr``-escaped spellings.
2. **PEM blocks**: ``-----BEGIN <LABEL>-----`` up to the matching ``-----END
   …-----`` (or the end of the text, for a block cut short) becomes
   ``-----BEGIN <LABEL>-----[redacted]-----END <LABEL>-----``. Every PEM block
   is masked, certificates too: telling them apart is not worth a leak.
3. **URIs with user-info**: ``scheme://user:password@host`` keeps the user and
   masks the password; ``scheme://token@host`` (no colon) masks the whole
   user-info (except Azure storage's ``abfss://container@account…`` and
   ``wasbs://…``, whose user-info is a container name). A ``/`` in a password must
   be percent-encoded (RFC 3986) to be recognised.
4. **Pairs whose key looks secret** (see below), in the forms ``key=value``,
   ``key: value``, ``"key": "value"``, ``'key': 'value'``, JSON-in-JSON
   ``\\"key\\": \\"value\\"`` and JAAS ``key="value"``. A quoted value keeps its
   quotes (``"password": "[redacted]"``); a quoted value that never closes (a
   payload cut by a message's snippet) is masked to the end of the text; a bare
   value ends at whitespace or one of ``;,&"'\\)]}`` (after an HTTP ``Bearer`` or
   ``Basic`` scheme word, which is masked with it).

**Secret-looking keys** (:func:`is_secret_key`, case-insensitive; a nested
config key is judged by its whole dotted path): a key containing ``password``,
``passwd``, ``secret``, ``token``, ``credential``, ``sasl.jaas.config``,
``keystore``, ``authorization``, ``userinfo``/``user.info``, ``private key``,
``api key``, ``access key`` (with ``.``, ``_``, ``-`` or nothing between the
words), ``webhook`` (an alert channel's URL: whoever holds it may post to the channel),
or ``account.key`` as whole segments (Hadoop's
``fs.azure.account.key.<account>…``); or a key that *ends* in ``key`` after a
separator (``*.key``, ``*_key``, ``*-key``) or in camelCase (``sslKey``).
Not secret: a bare ``key`` (the Kafka record key), ``key`` in the middle
(``kafka.key.deserializer``, ``partition.key.column``), words that merely
contain it (``keyword``, ``monkey``, ``keySizeBits``), ``auth`` alone
(``spark.authenticate``, ``…auth.type``). In free text (rule 4) the same words
apply, plus ``*.key``/``*_key``/``*-key`` at the end of the key; camelCase and
bare ``key`` are not treated as secret there.

**Handed to Spark**: conf values and reader options must reach the JVM; they are
sent inside :func:`unlogged_jvm_calls`, so Py4J's DEBUG log of every command does
not record them.

**Not masked**: the raw ``key``/``value``/``headers`` bytes of a quarantined
record (data, kept byte for byte — the one intended copy); values that are not
under a secret-looking key, not in a configured secret, and in none of the forms
above (a free-text password with no key in front of it is found only when it was
configured).

The native Spark version (:func:`quarantine.sinks.redacted_error.redact_column` without
secrets) runs the same rules 2-4 as Java regexes (:data:`JAVA_RULES`, ``regexp_replace``); a
differential test keeps both implementations equal. This module imports no engine (the
``quarantine`` command's start reads it through :mod:`quarantine.errors`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GUARD_FRAGMENTS",
    "JAVA_GUARD",
    "JAVA_RULES",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "collect_secrets",
    "is_secret_key",
    "redact",
    "redact_text",
    "unlogged_jvm_calls",
]

#: What a masked secret reads as, everywhere.
REDACTED = "[redacted]"

_WORDS = (
    r"password|passwd|secret|token|credential|sasl\.jaas\.config|keystore|authorization"
    r"|user[._-]?info|private[._-]?key|api[._-]?key|access[._-]?key|webhook"
)
_SECRET_KEY = re.compile(
    rf"(?:{_WORDS})|(?<![a-z0-9])account\.key(?![a-z0-9])|[._-]key$", re.IGNORECASE
)
_CAMEL_KEY = re.compile(r"[a-z0-9]Key$")

#: Keys of these config mappings are column names (a stage's ``columns: {name: type}``), not settings.
_DATA_MAPPINGS = frozenset({"columns", "formats"})
#: Values never collected as secrets: a switch is not a credential, and masking it everywhere garbles text.
_NOT_SECRET_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null"})
#: Collected secret values shorter than this are not scrubbed from free text (rules 2-4 still apply).
MIN_SECRET_CHARS = 4


@dataclass(frozen=True)
class _Rule:
    """One regex of rules 2-4, with its replacement, written once for Python and Java.

    ``replacement`` is a sequence of parts: ``("g", name)`` a group, ``("s", text)``
    literal text.
    """

    pattern: str
    ignore_case: bool
    replacement: tuple[tuple[str, str], ...]

    def python(self) -> tuple[re.Pattern[str], Callable[[re.Match[str]], str]]:
        flags = re.IGNORECASE if self.ignore_case else 0
        parts = self.replacement

        def repl(m: re.Match[str]) -> str:
            return "".join(m.group(v) if k == "g" else v for k, v in parts)

        return re.compile(self.pattern, flags), repl

    def java(self) -> tuple[str, str]:
        """``(regex, replacement)`` for ``java.util.regex`` (Spark's ``regexp_replace``)."""
        flags = "(?iU)" if self.ignore_case else "(?U)"
        regex = flags + self.pattern.replace("(?P<", "(?<").replace(r"\Z", r"\z")
        repl = "".join(
            "${" + v + "}" if k == "g" else v.replace("\\", "\\\\").replace("$", "\\$")
            for k, v in self.replacement
        )
        return regex, repl


# The key is a whole run of key characters (possessive: never re-split, so the cost is linear
# in the text) that holds a secret word or ends in .key/_key/-key.
_KEY_TEXT = (
    rf"(?P<k>(?<![\w.\-])(?=[\w.\-]*?(?:{_WORDS}|account\.key(?![a-z0-9])|[._-]key(?![\w.\-])))[\w.\-]++)"
)
_SEP = r"""(?P<sep>(?:\\?["'])?\s*[=:]\s*)"""
_SCHEME = r"(?P<s>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)"

_RULES: tuple[_Rule, ...] = (
    # 2. PEM blocks (to their END line, or to the end of a text cut short)
    _Rule(
        r"-----BEGIN (?P<label>[A-Z0-9 ]{1,64})-----[\s\S]*?(?:-----END [A-Z0-9 ]{1,64}-----|\Z)",
        False,
        (("s", "-----BEGIN "), ("g", "label"), ("s", "-----" + REDACTED + "-----END "),
         ("g", "label"), ("s", "-----")),
    ),
    # 3. URIs: user:password@ keeps the user; user-info without a colon is masked whole
    _Rule(
        _SCHEME + r"""(?P<u>[^\s:/?#@"'\[\]]*):(?P<p>[^\s/?#"']*)@""",
        False,
        (("g", "s"), ("g", "u"), ("s", ":" + REDACTED + "@")),
    ),
    # (not Azure storage's container@account authority: abfs[s]://, wasb[s]://)
    _Rule(
        r"(?!(?:abfss?|wasbs?)://)" + _SCHEME + r"""(?P<u>[^\s:/?#@"'\[\]]+)@""",
        False,
        (("g", "s"), ("s", REDACTED + "@")),
    ),
    # 4. pairs: JSON-in-JSON \"v\", "v", 'v', then bare values
    _Rule(
        _KEY_TEXT + _SEP + r'''\\"(?:[^"\\]|\\[^"])*(?:\\"|\Z)''',
        True,
        (("g", "k"), ("g", "sep"), ("s", '\\"' + REDACTED + '\\"')),
    ),
    _Rule(
        _KEY_TEXT + _SEP + r'''"(?:[^"\\]|\\[\s\S])*(?:"|\Z)''',
        True,
        (("g", "k"), ("g", "sep"), ("s", '"' + REDACTED + '"')),
    ),
    _Rule(
        _KEY_TEXT + _SEP + r"""'[^']*(?:'|\Z)""",
        True,
        (("g", "k"), ("g", "sep"), ("s", "'" + REDACTED + "'")),
    ),
    _Rule(
        _KEY_TEXT + _SEP + r"""(?:(?:bearer|basic)\s+)?(?:\[redacted\]|[^\s;,&"'\\)\]}]+)""",
        True,
        (("g", "k"), ("g", "sep"), ("s", REDACTED)),
    ),
)
_PY_RULES = tuple(r.python() for r in _RULES)
#: Rules 2-4 for ``java.util.regex``: ``(regex, replacement)`` pairs, applied in order.
JAVA_RULES: tuple[tuple[str, str], ...] = tuple(r.java() for r in _RULES)
#: Text that one of rules 2-4 matches holds one of these, matched case-insensitively as the
#: pair rules match (a PEM block its BEGIN line, a URI its ``://``, a pair's key a word of
#: :data:`_WORDS` or ``key``). Text without any needs no rule: :func:`redact_column` looks for
#: them first, with one cheap regex, instead of running the seven (most failed records'
#: messages hold none). ``test_redaction`` checks that no rule matches text without them.
GUARD_FRAGMENTS = (
    "-----BEGIN ", "://", "passw", "secret", "token", "credential", "jaas", "key", "authorization", "user",
    "webhook",
)
#: :data:`GUARD_FRAGMENTS` for ``java.util.regex`` (``rlike``), flags as the pair rules'.
JAVA_GUARD = "(?iU)" + "|".join(GUARD_FRAGMENTS)


def is_secret_key(key: str) -> bool:
    """Whether a config key (or a dotted path of keys) names a credential.

    See the module docstring for the exact rule; e.g. ``kafka.ssl.keystore.key``,
    ``fs.azure.account.key.<acct>…``, ``sasl.jaas.config`` are secret;
    ``key``, ``kafka.key.deserializer``, ``spark.authenticate`` are not.
    """
    return bool(_SECRET_KEY.search(key) or _CAMEL_KEY.search(key))


def _spellings(secret: str) -> list[str]:
    """A secret as it appears raw, JSON-escaped and ``repr``-escaped (distinct ones)."""
    out = [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], repr(secret)[1:-1]]
    return list(dict.fromkeys(s for s in out if s))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text with every secret masked as :data:`REDACTED` (pure, idempotent).

    Args:
        text: any text a person may read (a log line, an exception message, a stack trace).
        secrets: configured secret values (:func:`collect_secrets`), masked wherever they
            appear, raw or escaped.

    Returns:
        The text with rules 1-4 of the module docstring applied.
    """
    out = text
    values = sorted({v for s in secrets if s for v in _spellings(s)}, key=len, reverse=True)
    for s in values:  # longest first: a whole JAAS line before the password inside it
        out = out.replace(s, REDACTED)
    for pattern, repl in _PY_RULES:
        out = pattern.sub(repl, out)
    return out


def _child(path: str, key: Any, parent: str) -> str:
    if parent.rsplit(".", 1)[-1] in _DATA_MAPPINGS:
        return path  # a column name says nothing about its value
    return f"{path}.{key}" if path else str(key)


def redact(value: Any, key: str = "", *, secrets: Iterable[str] = ()) -> Any:
    """A copy of a config value with credentials replaced by :data:`REDACTED`.

    Mappings and lists are walked; a scalar whose dotted key path looks secret
    (:func:`is_secret_key`) is replaced whole; every other string has rules 2-4
    applied (a password inside a URI, a JAAS line or a PEM block is masked, the
    rest kept). Keys of a ``columns:``/``formats:`` mapping are column names and
    are not judged.

    Args:
        value: the config (a mapping as loaded from YAML) or a part of it.
        key: the dotted path of ``value`` inside the config ("" for the root).
        secrets: configured secret values, also masked inside every string (for
            structures other than the config itself, e.g. a validation result).
    """
    keep = tuple(secrets)
    if isinstance(value, Mapping):
        return {str(k): redact(v, _child(key, k, key), secrets=keep) for k, v in value.items()}
    if key and is_secret_key(key):
        return REDACTED
    if isinstance(value, list | tuple):
        return [redact(v, key, secrets=keep) for v in value]
    if isinstance(value, str):
        return redact_text(value, keep)
    return value


def _scrubbable(value: str) -> bool:
    return len(value) >= MIN_SECRET_CHARS and value.lower() not in _NOT_SECRET_VALUES and value != REDACTED


def collect_secrets(value: Any, key: str = "") -> tuple[str, ...]:
    """Every configured secret value, to scrub from any text (see :func:`redact_text`).

    Collected: each scalar under a secret-looking dotted key path (bool and None
    never; strings of at least :data:`MIN_SECRET_CHARS` characters that are not a
    switch like ``true``/``off``), and inside any string: the value of a secret
    ``key=value`` pair (a JAAS line, a JDBC URL), a URI's password, and every PEM
    block (whole, and its body). A URI's user without a password is masked where
    it appears in a URI but not collected (``postgres://admin@db`` would otherwise
    mask every ``admin``).

    Args:
        value: the config (a mapping as loaded from YAML) or a part of it.
        key: the dotted path of ``value`` inside the config ("" for the root).
    """
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            found.extend(collect_secrets(v, _child(key, k, key)))
    elif isinstance(value, list | tuple):
        for v in value:
            found.extend(collect_secrets(v, key))
    elif value is not None and not isinstance(value, bool):
        text = str(value)
        if key and is_secret_key(key) and _scrubbable(text):
            found.append(text)
        if isinstance(value, str):
            found.extend(v for v in _embedded(value) if _scrubbable(v))
    return tuple(dict.fromkeys(found))


_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]{1,64}-----([\s\S]*?)(?:-----END [A-Z0-9 ]{1,64}-----|\Z)")


def _embedded(text: str) -> list[str]:
    """Secret parts of one config string: PEM blocks, URI user-info, secret pair values."""
    out: list[str] = []
    for m in _PEM_BLOCK.finditer(text):
        out += [m.group(0), m.group(1).strip()]
    out += [m.group("p") for m in _PY_RULES[1][0].finditer(text)]
    for pattern, _ in _PY_RULES[3:]:
        for m in pattern.finditer(text):
            inner = m.group(0)[len(m.group("k")) + len(m.group("sep")):]
            out.append(inner.strip().strip("\\\"'"))
    return out


#: Py4J's loggers: at DEBUG they log every command sent to the JVM, arguments included.
_PY4J_LOGGERS = ("py4j", "py4j.clientserver", "py4j.java_gateway")


@contextlib.contextmanager
def unlogged_jvm_calls() -> Iterator[None]:
    """Hand secrets to Spark (conf values, reader options) without Py4J logging them.

    Py4J logs each command it sends to the JVM at DEBUG, string arguments verbatim,
    so a root logger at DEBUG would record every Spark conf value and reader option.
    Inside this context Py4J's loggers stop below INFO (process-wide: other threads'
    Py4J debug lines are dropped too, for the few milliseconds it lasts).
    """
    loggers = [logging.getLogger(name) for name in _PY4J_LOGGERS]
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.INFO))
    try:
        yield
    finally:
        for lg, level in zip(loggers, saved, strict=True):
            lg.setLevel(level)
