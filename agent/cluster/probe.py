"""A SIP OPTIONS ping over UDP: is there a SIP stack answering on host:port, and with what?

The cluster uses it to wait for kamailio and for each worker to open its SIP port (a worker
opens it only once its models are loaded), the same question kamailio's dispatcher asks every
``ds_ping_interval``. A plain socket, no SIP stack: imports no pjsua2.
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid

_STATUS = re.compile(rb"^SIP/2\.0 (\d{3}) ")


def options_ping(host: str, port: int, timeout: float = 1.0) -> int | None:
    """Send one OPTIONS to ``host:port`` and return the final status code, or None.

    Args:
        host: IPv4 address or name of the SIP UDP socket.
        port: its port.
        timeout: seconds to wait for a final (>= 200) reply.

    Returns:
        The status code of the first final reply (200 from a live agent or kamailio), None if
        nothing final came back in time.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("0.0.0.0" if host not in ("127.0.0.1", "localhost") else "127.0.0.1", 0))
        local_ip, local_port = sock.getsockname()
        if local_ip == "0.0.0.0":
            local_ip = "127.0.0.1"
        branch = "z9hG4bK" + uuid.uuid4().hex[:16]
        call_id = f"{uuid.uuid4().hex}@callagent-probe"
        msg = (f"OPTIONS sip:{host}:{port} SIP/2.0\r\n"
               f"Via: SIP/2.0/UDP {local_ip}:{local_port};branch={branch};rport\r\n"
               f"Max-Forwards: 70\r\n"
               f"From: <sip:probe@{local_ip}>;tag={os.getpid()}{local_port}\r\n"
               f"To: <sip:{host}:{port}>\r\n"
               f"Call-ID: {call_id}\r\n"
               f"CSeq: 1 OPTIONS\r\n"
               f"Accept: application/sdp\r\n"
               f"Content-Length: 0\r\n\r\n")
        deadline = time.monotonic() + timeout
        try:
            sock.sendto(msg.encode(), (host, port))
        except OSError:
            return None
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, _ = sock.recvfrom(65535)
            except (TimeoutError, ConnectionRefusedError, OSError):
                return None
            m = _STATUS.match(data)
            if m and int(m.group(1)) >= 200 and call_id.encode() in data:
                return int(m.group(1))
        return None


def wait_answering(host: str, port: int, timeout: float, every: float = 0.5) -> bool:
    """Ping until ``host:port`` answers OPTIONS with 200, or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if options_ping(host, port, timeout=min(1.0, every * 2)) == 200:
            return True
        time.sleep(every)
    return False
