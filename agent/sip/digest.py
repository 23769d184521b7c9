"""SIP digest authentication of incoming INVITEs (RFC 2617 / RFC 7616, MD5, ``qop=auth``).

The agent is the server side: it challenges an INVITE without credentials with a 401 and a
``WWW-Authenticate: Digest`` header, and checks the ``Authorization`` header of the INVITE that
comes back against the configured users' passwords, with :mod:`hashlib` and :mod:`hmac` only.

Nonces are stateless: ``<issued, hex seconds>.<HMAC-SHA256 of the issue time, the realm and the
caller's address>`` under a per-process random key, so any nonce this process issued can be
checked without remembering it, a forged or foreign one fails, and an old one expires (it is
then refused as ``stale``, and the caller is challenged again with ``stale=true``, so a client
re-sends without asking its user). Responses already accepted are remembered until their nonce
expires, so a captured INVITE replayed within that time is refused too. That memory is this
process's own: a cluster's workers do none of this, kamailio authenticates its callers at the
edge with one-time nonces and the same codes, a replay there challenged again (401) rather than
refused (:mod:`agent.cluster.edge`).

Only MD5 and ``qop=auth``: what SIP phones and sipp speak. Pure Python; imports no pjsua2.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

MAX_REPLAY_MEMORY = 10_000
"""Accepted responses remembered at most (oldest forgotten first), so a flood of valid INVITEs
cannot grow the process without bound."""

Verdict = Literal["ok", "challenge", "stale", "bad"]
"""What :meth:`DigestAuth.check` found: authenticated; no credentials for our realm, or a nonce
this process did not issue (challenge); right credentials on an expired nonce (challenge again
with ``stale=true``); or credentials that are wrong (refuse)."""

_PARAM = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*(?:,|$)')


def md5_hex(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def digest_response(user: str, realm: str, password: str, method: str, uri: str, nonce: str,
                    nc: str = "", cnonce: str = "", qop: str = "") -> str:
    """The ``response`` value a client computes (RFC 2617 section 3.2.2.1, MD5).

    HA1 = MD5(user:realm:password), HA2 = MD5(method:uri); without ``qop``, the RFC 2069
    form MD5(HA1:nonce:HA2).

    Args:
        user: the user name of the credentials.
        realm: the challenge's realm.
        password: the user's password.
        method: the request's method (``INVITE``).
        uri: the digest ``uri``.
        nonce: the challenge's nonce.
        nc: the client's nonce count (with ``qop``).
        cnonce: the client's nonce (with ``qop``).
        qop: the quality of protection chosen (``auth``), or empty.

    Returns:
        32 lower-case hex digits.
    """
    ha1 = md5_hex(f"{user}:{realm}:{password}")
    ha2 = md5_hex(f"{method}:{uri}")
    if qop:
        return md5_hex(f"{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}")
    return md5_hex(f"{ha1}:{nonce}:{ha2}")


def parse_digest(value: str) -> dict[str, str] | None:
    """The parameters of a ``Digest`` credentials or challenge value; None if it is not one.

    ``Digest username="a", nc=00000001`` -> ``{"username": "a", "nc": "00000001"}`` (names
    lower-cased, quotes and escapes removed).
    """
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() != "digest":
        return None
    params: dict[str, str] = {}
    pos = 0
    rest = rest.strip()
    while pos < len(rest):
        m = _PARAM.match(rest, pos)
        if m is None or m.end() == pos:
            return None
        name, raw = m.group(1).lower(), m.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params[name] = raw
        pos = m.end()
    return params


def header_values(message: str, name: str) -> list[str]:
    """Every value of header ``name`` in a SIP message's head (folded lines joined)."""
    head = message.replace("\r\n", "\n").split("\n\n", 1)[0]
    lines: list[str] = []
    for line in head.split("\n")[1:]:
        if line[:1] in (" ", "\t") and lines:
            lines[-1] += " " + line.strip()  # a continuation line (RFC 3261 7.3.1)
        else:
            lines.append(line)
    wanted = name.lower()
    out = []
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == wanted:
            out.append(value.strip())
    return out


def request_line(message: str) -> tuple[str, str]:
    """``(method, request-URI)`` of a SIP request's first line (empty strings if malformed)."""
    parts = message.split("\n", 1)[0].split()
    return (parts[0], parts[1]) if len(parts) >= 3 else ("", "")


def same_resource(digest_uri: str, request_uri: str) -> bool:
    """Whether credentials computed for ``digest_uri`` may be used for ``request_uri``.

    RFC 2617 (3.2.2.5) wants the request-URI itself, which phones send; sipp's
    ``[authentication]`` sends the agent's address without the user (``sip:HOST:PORT``), so
    that is accepted too: it still names this agent, and a response is good only once.
    """
    if digest_uri == request_uri:
        return True

    def parts(uri: str) -> tuple[str, str, str]:
        scheme, _, rest = uri.partition(":")
        rest = rest.split(";", 1)[0].split("?", 1)[0]
        user, at, hostport = rest.rpartition("@")
        return scheme.lower(), user if at else "", hostport.lower()

    d_scheme, d_user, d_host = parts(digest_uri)
    r_scheme, _, r_host = parts(request_uri)
    return not d_user and (d_scheme, d_host) == (r_scheme, r_host) and bool(d_host)


@dataclass(frozen=True)
class Check:
    """The outcome of checking one request's credentials."""

    verdict: Verdict
    user: str = ""
    """The user the credentials named (empty when there were none)."""
    why: str = ""
    """For a log line: what was wrong (never a password or a hash)."""


class DigestAuth:
    """Challenges and checks INVITEs for one realm and a fixed set of users.

    Args:
        realm: the protection space named in challenges (``sip.auth.realm``).
        passwords: user name -> password (resolved from the environment or files).
        nonce_ttl_s: how long a nonce stays good after it was issued.
        clock: wall-clock seconds (nonces carry it; injectable for tests).
        key: the HMAC key of the nonces; random per process when None.
    """

    def __init__(self, realm: str, passwords: dict[str, str], nonce_ttl_s: float = 300.0,
                 clock: Callable[[], float] = time.time, key: bytes | None = None):
        self.realm = realm
        self._passwords = dict(passwords)
        self.nonce_ttl_s = nonce_ttl_s
        self._clock = clock
        self._key = key if key is not None else os.urandom(32)
        self._seen: OrderedDict[tuple[str, str, str], float] = OrderedDict()

    def __repr__(self) -> str:  # never the passwords
        return f"DigestAuth(realm={self.realm!r}, users={sorted(self._passwords)})"

    # ---- nonces ----------------------------------------------------------------------------

    def nonce(self, source: str) -> str:
        """A fresh nonce for a challenge to ``source`` (the INVITE packet's address)."""
        issued = f"{int(self._clock()):x}"
        return f"{issued}.{self._mac(issued, source)}"

    def _mac(self, issued: str, source: str) -> str:
        msg = f"{issued}:{self.realm}:{source}".encode()
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()[:32]

    def _nonce_age(self, nonce: str, source: str) -> float | None:
        """Seconds since this process issued ``nonce`` to ``source``; None if it did not."""
        issued, _, mac = nonce.partition(".")
        try:
            at = int(issued, 16)
        except ValueError:
            return None
        if not hmac.compare_digest(mac, self._mac(issued, source)):
            return None
        return self._clock() - at

    def challenge(self, source: str, stale: bool = False) -> str:
        """The ``WWW-Authenticate`` value of a 401 to ``source``."""
        value = (f'Digest realm="{self.realm}", nonce="{self.nonce(source)}", '
                 f'algorithm=MD5, qop="auth"')
        return value + ", stale=true" if stale else value

    # ---- checking --------------------------------------------------------------------------

    def check(self, message: str, source: str) -> Check:
        """Check the credentials of a request (its whole text) that came from ``source``."""
        mine = None
        for value in header_values(message, "Authorization"):
            params = parse_digest(value)
            if params is not None and params.get("realm") == self.realm:
                mine = params
                break
        if mine is None:
            return Check("challenge")
        user = mine.get("username", "")
        method, request_uri = request_line(message)
        problem = self._problem(mine, user, request_uri)
        if problem:
            return Check("bad", user, problem)
        age = self._nonce_age(mine["nonce"], source)
        if age is None:
            # Not this process's (issued before a restart) or forged: challenge again.
            return Check("challenge", user, "unknown nonce")
        expected = digest_response(user, self.realm, self._passwords[user], method,
                                   mine["uri"], mine["nonce"], mine["nc"], mine["cnonce"], "auth")
        if not hmac.compare_digest(expected, mine["response"].lower()):
            return Check("bad", user, "wrong password")
        if not -5.0 <= age <= self.nonce_ttl_s:  # a nonce from a clock set back is no good
            return Check("stale", user, "nonce expired")
        if not self._first_use(mine, age):
            return Check("bad", user, "replayed")
        return Check("ok", user)

    def _problem(self, p: dict[str, str], user: str, request_uri: str) -> str:
        """Why the credentials cannot be right whatever the password ("" if they might be)."""
        if user not in self._passwords:
            return "unknown user"
        if p.get("algorithm", "MD5").upper() != "MD5":
            return f"algorithm {p['algorithm']} not offered"
        if p.get("qop", "").lower() != "auth":
            return "qop must be auth"
        if not all(p.get(k) for k in ("nonce", "uri", "response", "nc", "cnonce")):
            return "incomplete credentials"
        if not same_resource(p["uri"], request_uri):
            return "uri is not the request-URI"
        return ""

    def _first_use(self, p: dict[str, str], age: float) -> bool:
        """Remember an accepted response; False if it was accepted before (a replay)."""
        now = self._clock()
        while self._seen and (next(iter(self._seen.values())) < now
                              or len(self._seen) >= MAX_REPLAY_MEMORY):
            self._seen.popitem(last=False)
        key = (p["nonce"], p["cnonce"], p["nc"])
        if key in self._seen:
            return False
        self._seen[key] = now + self.nonce_ttl_s - age  # when the nonce itself expires
        return True
