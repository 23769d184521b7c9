"""Options of the SIP endpoint (``[sip]``): where it listens, who may call it, and how securely.

Pure data, like :mod:`dialplan.options`: parsed once from ``config.toml`` and handed to the
user agent (:mod:`agent.sip`) and kamailio's edge (:mod:`agent.cluster.edge`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

from dialplan.secrets import REF_FORM, is_secret_ref


@dataclass(frozen=True)
class RegistrarOptions:
    """Optional registration with a PBX (``[sip.registrar]``); empty uri = listen directly."""

    uri: str = ""
    """Registrar URI, e.g. sip:pbx.example.com."""
    username: str = ""
    """Digest auth user (also the account's user part)."""
    password: str = ""
    """Digest auth password (never logged)."""
    realm: str = "*"
    """Digest realm; * accepts any."""


PRIVATE_NETWORKS = ("127.0.0.0/8", "::1", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                    "fc00::/7")
"""``sip.allow``'s default: loopback and private (RFC 1918, unique local) networks. An agent
bound to a public address then still answers only its own networks until told otherwise."""


@dataclass(frozen=True)
class SIPAuthOptions:
    """Digest authentication of incoming INVITEs (``[sip.auth]``); no users = off.

    With users, an INVITE without credentials gets 401 and a challenge (MD5, ``qop=auth``), one
    with a wrong password 403; only the right credentials reach the dialplan. Passwords never
    go in the config: each user names where its password is.
    """

    realm: str = "callagent"
    """The realm of the challenges (what a phone shows when asking for the password)."""
    users: dict[str, str] = field(default_factory=dict)
    """User name -> where its password is: ``"env:VARIABLE"`` (an environment variable) or
    ``"file:/path"`` (the file's first line), read once at start; e.g.
    ``users = { alice = "env:ALICE_SIP_PASSWORD" }``. Never logged."""
    nonce_ttl_s: float = 300.0
    """How long a challenge's nonce stays good; an older one is challenged again (stale)."""

    def __post_init__(self) -> None:
        for user, where in self.users.items():
            if not is_secret_ref(where):
                # The value itself is not repeated: it may be a password put there by mistake.
                raise ValueError(f"users.{user}: expected {REF_FORM} (the password itself "
                                 "never goes in the config)")
            if not user or ":" in user:
                raise ValueError(f"users.{user}: not a user name")
        if self.users and not self.realm:
            raise ValueError("realm: must not be empty")
        if self.nonce_ttl_s <= 0:
            raise ValueError(f"nonce_ttl_s = {self.nonce_ttl_s}: must be more than 0")


@dataclass(frozen=True)
class TLSOptions:
    """SIP over TLS (``[sip.tls]``): a TLS listener beside ``sip.transport``'s, or alone.

    With ``certificate`` set, the agent also listens for TLS on ``port``; with
    ``sip.transport = "tls"`` it listens for TLS alone, on ``sip.port``. A self-signed
    certificate will do for phones told to accept it (README, "Who may call").
    """

    certificate: str = ""
    """PEM certificate file the agent presents (its chain after it); empty = no TLS."""
    private_key: str = ""
    """PEM private key file of the certificate (unencrypted)."""
    port: int = 5061
    """TLS port when another transport is on ``sip.port``."""
    ca_list: str = ""
    """PEM file of the CAs that sign callers' certificates, for ``verify_clients``."""
    verify_clients: bool = False
    """Refuse TLS connections without a certificate ``ca_list`` signs (mutual TLS)."""

    def __post_init__(self) -> None:
        if self.certificate and not self.private_key:
            raise ValueError("private_key: needed with certificate")
        if self.verify_clients and not self.ca_list:
            raise ValueError("ca_list: needed by verify_clients")


@dataclass(frozen=True)
class SIPOptions:
    """SIP user agent (``[sip]``)."""

    host: str = "127.0.0.1"
    """Address the transport binds to."""
    port: int = 5060
    """SIP port."""
    transport: Literal["udp", "tcp", "both", "tls"] = "udp"
    """Transport(s) to open on ``port``; "tls" needs ``[sip.tls]``'s certificate."""
    rtp_port: int = 40000
    """First RTP port."""
    max_calls: int = 4
    """Concurrent calls of this machine: every process with this config (``serve``'s worker,
    ``campaign``, ``dial``) takes a slot of ``slots_dir`` per call, so inbound and outbound
    calls share it. The pjsua2 wheel also caps each process at 4."""
    slots_dir: str = ""
    """Directory of the ``max_calls`` lock files (one per call slot, held with ``flock`` for a
    call's life; the kernel frees a dead process's). Empty = ``slots`` in ``db.spool_dir``.
    Processes share the cap when they share this directory."""
    codecs: list[str] = field(default_factory=lambda: ["PCMU", "PCMA", "G722"])
    """Codec preference, first = most preferred."""
    srtp: Literal["off", "optional", "mandatory"] = "off"
    """Encrypted media (SRTP, keys exchanged in the SDP, RFC 4568): "optional" answers an SRTP
    offer with SRTP and a plain one with RTP; "mandatory" refuses a plain RTP offer (488). The
    keys travel in the signalling, so pair it with TLS (``[sip.tls]``)."""
    admit_max_wait_s: float = 3.0
    """Admission control from measured load: while the work callers wait on (ASR of an ended
    turn, the first clause, its TTS) has waited longer than this for the CPU (p90 over the last
    ``admit_window_s``), new calls are refused with ``overload_code`` instead of being answered
    into silence. 0 = off (only ``max_calls`` limits)."""
    admit_window_s: float = 30.0
    """How far back the scheduler's waits count for admission."""
    allow: tuple[str, ...] = PRIVATE_NETWORKS
    """Networks allowed to call (CIDR, e.g. ``10.0.0.0/8``, or single addresses), checked
    against the address an INVITE's packet came from; any other caller is refused 403 and
    logged. Default: loopback and private networks (:data:`PRIVATE_NETWORKS`); an explicit
    empty list (``allow = []``) = anyone who reaches the port."""
    invite_rate: float = 5.0
    """New INVITEs per second each source address may send, sustained (a token bucket of
    ``invite_burst``); beyond it, 503 with ``Retry-After``, and one log line per source per
    second. 0 = no limit. Behind a proxy (kamailio) every call comes from the proxy's address,
    so set it for the proxy's whole traffic."""
    invite_burst: int = 10
    """INVITEs a source may send at once after a quiet spell (the bucket's size)."""
    overload_code: int = 503
    """SIP status for a call refused because the agent is overloaded (503 or 486)."""
    metrics_port: int = 0
    """Port of the Prometheus ``/metrics`` endpoint (plain HTTP on ``metrics_host``): calls
    active, turns, voice-to-voice histogram, unanswered turns by reason, scheduler queue depth.
    0 = off. Under ``callagent cluster`` this port serves every worker's metrics with a
    ``worker`` label, and worker N gets this port + N."""
    metrics_host: str = "127.0.0.1"
    """Address ``/metrics`` binds to: this machine only unless set (e.g. ``0.0.0.0`` for a
    Prometheus elsewhere); it is unauthenticated, so not ``host`` by default."""
    registrar: RegistrarOptions = field(default_factory=RegistrarOptions)
    auth: SIPAuthOptions = field(default_factory=SIPAuthOptions)
    tls: TLSOptions = field(default_factory=TLSOptions)

    def __post_init__(self) -> None:
        if self.transport == "tls" and not self.tls.certificate:
            raise ValueError('tls.certificate: needed by transport = "tls"')
        if self.invite_rate < 0:
            raise ValueError(f"invite_rate = {self.invite_rate}: must be 0 (off) or more")
        if self.max_calls < 1:
            raise ValueError(f"max_calls = {self.max_calls}: must be at least 1")
        if self.invite_burst < 1:
            raise ValueError(f"invite_burst = {self.invite_burst}: must be at least 1")
        for net in self.allow:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as e:
                raise ValueError(f"allow = {net!r}: not a network or address ({e})") from None

    def allows(self, source: str) -> bool:
        """Whether a caller at ``source`` (an IP address) may call."""
        if not self.allow:
            return True
        try:
            addr = ipaddress.ip_address(source)
        except ValueError:
            return False
        return any(addr in ipaddress.ip_network(n, strict=False) for n in self.allow)
