"""The password file of Pulsar's ``AuthenticationProviderBasic`` and its password checks, as
that class reads and checks them (pulsar-broker-common,
``org.apache.pulsar.broker.authentication.AuthenticationProviderBasic``); no I/O.

The file (``basicAuthConf``) is htpasswd-style: one ``user:hash`` per line. Pulsar splits
each line at ``:`` with Java's ``String.split``, which drops trailing empty fields, and
refuses the whole file unless every line gives exactly two fields: a blank line, a comment
or a user without a hash stops the broker, and so it stops the gateway.

A password is checked the way ``AuthenticationProviderBasic.authenticate`` does it:

* a hash starting ``$apr1`` is Apache's MD5 (``$apr1$<salt>$<digest>``): it must split at
  ``$`` into exactly four fields, and the password is hashed with Commons Codec's
  ``Md5Crypt.apr1Crypt`` under the salt's first eight characters of ``[./0-9A-Za-z]``;
* any other hash goes to Commons Codec's ``Crypt.crypt`` with the hash's first two
  characters as salt. Two characters never carry a ``$1$``, ``$5$`` or ``$6$`` prefix, so
  that is always ``UnixCrypt``, the traditional DES crypt (13 characters, passwords cut to 8
  bytes); its salt must be two of ``[./0-9A-Za-z]``, so MD5 (``$1$``), SHA-256/512 and bcrypt
  hashes never match in Pulsar, and do not here.

The computed hash must equal the stored one exactly (compared in constant time here). The
hashes come from ``libpass`` (the maintained fork of passlib), pure Python, with no need of
the ``crypt`` module Python 3.13 removed; the tests check them against ``openssl passwd
-apr1``, libc's ``crypt`` and Pulsar's own test file.
"""

from __future__ import annotations

import hmac
import re
from typing import Final

from passlib.hash import apr_md5_crypt, des_crypt

__all__ = ["check_password", "java_split", "parse_htpasswd"]

#: What ``AuthenticationProviderBasic`` tests a stored hash for (no ``$`` after apr1).
_APR1_PREFIX: Final = "$apr1"
#: ``Md5Crypt.md5Crypt``'s salt: up to 8 of these characters right after the prefix.
_APR1_SALT: Final = re.compile(r"[./a-zA-Z0-9]{1,8}")
#: ``UnixCrypt``'s salt: its ``CRYPT_SALT_PATTERN`` (B64's alphabet), on the 2 characters.
_CRYPT_SALT: Final = re.compile(r"[./0-9A-Za-z]{2}")
#: ``BufferedReader.lines()``: a line ends at ``\n``, ``\r`` or ``\r\n``.
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` by a literal separator: trailing empty fields are dropped
    (``"a:"`` gives ``["a"]``, ``":"`` gives ``[]``), a text without the separator is one
    field (``""`` gives ``[""]``)."""
    if separator not in text:
        return [text]
    fields = text.split(separator)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def parse_htpasswd(data: bytes) -> dict[str, str]:
    """The users of a ``basicAuthConf`` file: user -> stored hash (a user listed twice keeps
    the later line's hash, as Pulsar's ``HashMap.put`` does).

    Raises:
        ValueError: A line that is not exactly ``user:hash`` (Pulsar's "The format of the
            password auth conf file is invalid").
    """
    text = data.decode("utf-8", errors="replace")  # Java's reader replaces bad bytes too
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the break ending the last line starts no line of its own
    users: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        fields = java_split(line, ":")
        if len(fields) != 2:
            raise ValueError(
                "The format of the password auth conf file is invalid "
                f"(line {number}: expected user:hash)"
            )
        users[fields[0]] = fields[1]
    return users


def check_password(stored: str, password: str) -> bool:
    """Whether ``password`` matches the ``stored`` hash, as Pulsar decides it (module
    docstring); a hash Pulsar cannot check (bad salt, wrong shape) matches nothing."""
    secret = password.encode("utf-8")
    try:
        if stored.startswith(_APR1_PREFIX):
            fields = java_split(stored, "$")
            salt = _APR1_SALT.match(fields[2]) if len(fields) == 4 else None
            if salt is None:
                return False
            computed = apr_md5_crypt.using(salt=salt.group(0)).hash(secret)
        else:
            if not _CRYPT_SALT.fullmatch(stored[:2]):
                return False
            computed = des_crypt.using(salt=stored[:2]).hash(secret)
    except ValueError:  # a password des_crypt will not take (a NUL byte)
        return False
    return hmac.compare_digest(computed.encode(), stored.encode())
