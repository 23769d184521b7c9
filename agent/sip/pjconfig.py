"""pjsua2 configuration from :class:`~dialplan.sip.SIPOptions`: endpoint, transports, account.

Pure construction, run once by :class:`~agent.sip.useragent.SipAgent` on its ``sip`` thread
while it creates the endpoint: how the endpoint runs (polled by that thread, its clock rate and
frame, no echo canceller), which transports listen (UDP, TCP, TLS with the configured
certificate), and the account that answers (its identity, registrar credentials, RTP ports and
SRTP policy). Kept out of the user agent so that module stays about calls; with it,
:mod:`agent.sip.callbacks` and :mod:`agent.sip.legs`, the only pjsua2 importers.
"""

from __future__ import annotations

import pjsua2 as pj

from dialplan.sip import SIPOptions

RTP_PORT_RANGE = 100
"""RTP (and RTCP) ports used from ``sip.rtp_port`` on: pjsua2 moves to fresh ports for later
calls, so captures and firewalls should allow this many."""

FRAME_MS = 20
"""The conference bridge's frame: the endpoint's audio ptime and every bridge port's."""

_KINDS = {"udp": ("udp",), "tcp": ("tcp",), "both": ("udp", "tcp"), "tls": ("tls",)}
_TYPES = {"udp": pj.PJSIP_TRANSPORT_UDP, "tcp": pj.PJSIP_TRANSPORT_TCP,
          "tls": pj.PJSIP_TRANSPORT_TLS}
SRTP_USE = {"off": pj.PJMEDIA_SRTP_DISABLED, "optional": pj.PJMEDIA_SRTP_OPTIONAL,
            "mandatory": pj.PJMEDIA_SRTP_MANDATORY}


def endpoint_config(clock_rate: int, log_level: int) -> pj.EpConfig:
    """The endpoint: polled by the ``sip`` thread, ``clock_rate`` audio, pjsua2's own log level."""
    cfg = pj.EpConfig()
    cfg.uaConfig.threadCnt = 0  # the sip thread polls: every SIP callback runs there
    cfg.uaConfig.mainThreadOnly = False
    # The wheel's compiled-in cap; the server enforces sip.max_calls itself (and logs the
    # 486), pjsua2 only refuses what exceeds 4 (calls still tearing down count here).
    cfg.uaConfig.maxCalls = 4
    cfg.uaConfig.userAgent = "callagent"
    cfg.logConfig.level = log_level
    cfg.logConfig.consoleLevel = log_level
    cfg.medConfig.clockRate = clock_rate
    cfg.medConfig.sndClockRate = clock_rate
    cfg.medConfig.audioFramePtime = FRAME_MS
    cfg.medConfig.ecTailLen = 0  # no echo canceller: barge-in gating handles echo
    cfg.medConfig.noVad = True  # send every frame; silence suppression would hide timing
    return cfg


def create_transports(ep: pj.Endpoint, o: SIPOptions) -> list[int]:
    """Open the listening transports and return their ids.

    ``sip.transport``'s on ``host:port``, and TLS on ``sip.tls.port`` when a certificate is
    configured beside UDP/TCP.
    """
    kinds = [(kind, o.port) for kind in _KINDS[o.transport]]
    if o.tls.certificate and o.transport != "tls":
        kinds.append(("tls", o.tls.port))
    ids = []
    for kind, port in kinds:
        tcfg = pj.TransportConfig()
        tcfg.port = port
        tcfg.boundAddress = o.host
        tcfg.publicAddress = o.host
        if kind == "tls":
            _tls(tcfg.tlsConfig, o)
        ids.append(ep.transportCreate(_TYPES[kind], tcfg))
    return ids


def _tls(t: pj.TlsConfig, o: SIPOptions) -> None:
    t.certFile = o.tls.certificate
    t.privKeyFile = o.tls.private_key
    t.CaListFile = o.tls.ca_list
    t.method = pj.PJSIP_TLSV1_2_METHOD  # the newest the wheel's OpenSSL speaks
    t.verifyClient = o.tls.verify_clients
    t.requireClientCert = o.tls.verify_clients
    # The agent calls out too (transfers, dial): it does not check servers' certificates, as
    # a PBX's is often self-signed; what it protects is the callers' side.
    t.verifyServer = False


def account_config(o: SIPOptions, uri: str, transport_ids: list[int]) -> pj.AccountConfig:
    """The account: ``uri`` when listening directly, else registered with ``sip.registrar``."""
    acfg = pj.AccountConfig()
    acfg.mediaConfig.transportConfig.port = o.rtp_port
    acfg.mediaConfig.transportConfig.portRange = RTP_PORT_RANGE
    acfg.mediaConfig.transportConfig.boundAddress = o.host
    acfg.mediaConfig.transportConfig.publicAddress = o.host
    acfg.mediaConfig.srtpUse = SRTP_USE[o.srtp]
    # SDES keys are in the SDP: over TLS they are as safe as the signalling; pjsua's default
    # (1) would also refuse SRTP offered over UDP/TCP, which sip.srtp leaves to the operator.
    acfg.mediaConfig.srtpSecureSignaling = 0
    r = o.registrar
    if r.uri:
        host = r.uri.split(":", 1)[-1]
        acfg.idUri = f"sip:{r.username}@{host}"
        acfg.regConfig.registrarUri = r.uri
        cred = pj.AuthCredInfo("digest", r.realm, r.username, 0, r.password)
        acfg.sipConfig.authCreds.append(cred)
    else:
        acfg.idUri = uri
        acfg.regConfig.registrarUri = ""
    if len(transport_ids) == 1:
        # Bind the account to its one transport: with TCP alone, pjsua cannot build a Contact
        # for an incoming INVITE otherwise (500, PJSIP_EUNSUPTRANSPORT; seen with sipp -t t1).
        acfg.sipConfig.transportId = transport_ids[0]
    return acfg


def refusing_config(o: SIPOptions, transport_ids: list[int]) -> pj.AccountConfig:
    """The account of INVITEs the gate refuses: media on a loopback transport, no sockets.

    pjsua sets up a new call's media (an RTP and an RTCP socket) before the incoming-call
    callback can refuse it, and a closed socket's ioqueue slot is reused only after a delay;
    the wheel's ioqueue has few slots, so a flood of refused INVITEs ran out of them and pjlib
    aborted the process (``pj_ioqueue_register_sock2`` assertion; ``bench flood``). INVITEs the
    gate refuses are given this account instead, whose loop transport opens no socket.
    """
    acfg = pj.AccountConfig()
    acfg.idUri = f"sip:refused@{o.host}"
    acfg.regConfig.registrarUri = ""
    acfg.mediaConfig.useLoopMedTp = True
    # Never refuse an offer on media grounds first (488): the gate's answer is the one sent.
    acfg.mediaConfig.srtpUse = pj.PJMEDIA_SRTP_OPTIONAL
    acfg.mediaConfig.srtpSecureSignaling = 0
    if len(transport_ids) == 1:
        acfg.sipConfig.transportId = transport_ids[0]
    return acfg
