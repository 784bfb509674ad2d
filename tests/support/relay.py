"""A loopback TCP relay that can freeze, cut and partition the connections through it.

::

    with Relay(server.port) as relay:           # listens on 127.0.0.1:relay.port
        client = connect_to(relay.port)          # forwarded to 127.0.0.1:server.port
        relay.freeze()                           # nothing flows either way, sockets stay open
        relay.thaw()                             # flowing again (held bytes are delivered)
        relay.cut()                              # every current connection reset (RST)
        relay.partition(10)                      # 10 s of network partition, then healed

* **freeze** / **thaw**: stop / resume forwarding in both directions, for the current
  connections and those accepted meanwhile (whose upstream connection is only opened at the
  thaw). Bytes already read are held, not dropped: like a network that stops delivering.
* **cut**: close every current connection on both sides with a reset (``SO_LINGER`` 0), as a
  router or firewall dropping the connection state would; new connections work at once.
* ``freeze(after_bytes=n)`` / ``cut(after_bytes=n)``: arm the fault instead, to strike once *n*
  more bytes have gone from the server to the client -- in the middle of a read, so most
  likely in the middle of a packet and of a transaction; :meth:`Relay.wait_fired` waits for it.
* **partition(seconds)**: for that long, ``mode="blackhole"`` (default): nothing flows and new
  connections are accepted but left silent (a client sees a server that does not answer,
  its handshake times out), as when packets are dropped; ``mode="refuse"``: current
  connections are reset and new ones refused (reset at once), as with an ICMP-rejecting
  firewall. It heals by itself (a timer) or with :meth:`Relay.heal`; connections still open
  then flow again (TCP would retransmit), which a client that gave up on them ignores.

Counters: ``accepted``, ``cuts`` (connections reset), ``refused``, ``freezes``,
``bytes_up``/``bytes_down``. Everything is bounded: sockets poll with short timeouts and
:meth:`Relay.close` ends every thread within a second or so.
"""

from __future__ import annotations

import select
import socket
import struct
import threading

__all__ = ["Relay"]

_POLL = 0.05
_CHUNK = 1 << 16


def _reset(sock: socket.socket | None) -> None:
    """Close *sock* with a TCP reset (no FIN handshake: the peer gets ECONNRESET)."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Link:
    """One relayed connection: the client's socket and (once opened) the server's."""

    def __init__(self, client: socket.socket):
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.eofs = 0           # directions that have ended with a FIN

    def close(self, reset: bool = False) -> None:
        with self.lock:
            if self.closed.is_set():
                return
            self.closed.set()
            for s in (self.client, self.upstream):
                if s is None:
                    continue
                if reset:
                    _reset(s)
                else:
                    try:
                        s.close()
                    except OSError:
                        pass


class Relay:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port``; see the module docstring.

    :param connect_timeout: how long opening the upstream connection may take; when it fails
        (the server is down) the client's connection is reset, as the server would refuse it.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1", *,
                 connect_timeout: float = 5.0):
        self.target = (target_host, int(target_port))
        self.connect_timeout = connect_timeout
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(_POLL)
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._refusing = False
        self._armed: list | None = None       # [bytes still to forward, fault, fired event]
        self._arm_lock = threading.Lock()
        self._stop = threading.Event()
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._heal_timer: threading.Timer | None = None
        self._threads: list[threading.Thread] = []
        self.accepted = 0
        self.cuts = 0
        self.refused = 0
        self.freezes = 0
        self.partitions = 0
        self.bytes_up = 0       # client -> server
        self.bytes_down = 0     # server -> client
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name=f"relay-{self.port}")

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> "Relay":
        if not self._accept_thread.is_alive():
            self._accept_thread.start()
        return self

    def __enter__(self) -> "Relay":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, close every connection, end every thread."""
        self._stop.set()
        self._flowing.set()          # wake the pumps so they see the stop
        if self._heal_timer is not None:
            self._heal_timer.cancel()
        try:
            self._listener.close()
        except OSError:
            pass
        for link in self.links():
            link.close()
        if self._accept_thread.is_alive():
            self._accept_thread.join(5)
        for t in list(self._threads):
            t.join(2)

    # --- faults -----------------------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    @property
    def partitioned(self) -> bool:
        """Frozen, or refusing connections."""
        return self.frozen or self._refusing

    def links(self) -> list[_Link]:
        with self._lock:
            self._links = [lk for lk in self._links if not lk.closed.is_set()]
            return list(self._links)

    def open_connections(self) -> int:
        return len(self.links())

    def freeze(self, after_bytes: int | None = None) -> None:
        """Stop forwarding both ways (current and new connections); sockets stay open. With
        *after_bytes*: once that many more bytes have gone to the client."""
        if after_bytes is not None:
            return self._arm(after_bytes, self.freeze)
        if self._flowing.is_set():
            self.freezes += 1
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again."""
        self._flowing.set()

    def cut(self, after_bytes: int | None = None) -> int:
        """Reset every current connection on both sides; returns how many were cut. With
        *after_bytes*: once that many more bytes have gone to the client (returns 0 now)."""
        if after_bytes is not None:
            self._arm(after_bytes, self.cut)
            return 0
        links = self.links()
        for link in links:
            link.close(reset=True)
        self.cuts += len(links)
        return len(links)

    def _arm(self, after_bytes: int, fault) -> None:
        with self._arm_lock:
            self._armed = [max(0, int(after_bytes)), fault, threading.Event()]

    def wait_fired(self, timeout: float) -> bool:
        """Wait for the armed fault to strike; False if it has not within *timeout* s (it is
        disarmed then)."""
        with self._arm_lock:
            armed = self._armed
        if armed is None:
            return True
        if armed[2].wait(timeout):
            return True
        with self._arm_lock:
            if self._armed is armed:
                self._armed = None
        return armed[2].is_set()

    def partition(self, seconds: float | None, mode: str = "blackhole") -> None:
        """A network partition for *seconds* (None: until :meth:`heal`); returns at once."""
        if mode not in ("blackhole", "refuse"):
            raise ValueError(f"mode must be 'blackhole' or 'refuse', not {mode!r}")
        self.partitions += 1
        if mode == "refuse":
            self._refusing = True
            self.cut()
        else:
            self.freeze()
        if self._heal_timer is not None:
            self._heal_timer.cancel()
        if seconds is not None:
            self._heal_timer = threading.Timer(seconds, self.heal)
            self._heal_timer.daemon = True
            self._heal_timer.start()

    def heal(self) -> None:
        """End a partition (and a freeze)."""
        self._refusing = False
        self.thaw()

    # --- plumbing ---------------------------------------------------------------------------

    def _spawn(self, target, *args, name: str) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=name)
        self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self._refusing:
                self.refused += 1
                _reset(sock)
                continue
            self.accepted += 1
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(sock)
            with self._lock:
                self._links.append(link)
            self._spawn(self._serve, link, name=f"relay-{self.port}-link")

    def _wait_flowing(self, link: _Link) -> bool:
        """Block while frozen; False when the link or the relay is closing."""
        while not self._flowing.wait(_POLL):
            if link.closed.is_set() or self._stop.is_set():
                return False
        return not (link.closed.is_set() or self._stop.is_set())

    def _serve(self, link: _Link) -> None:
        # The upstream connection is opened once traffic may flow (a connection accepted during
        # a freeze or a blackhole partition stays silent until then).
        if not self._wait_flowing(link):
            link.close()
            return
        try:
            up = socket.create_connection(self.target, timeout=self.connect_timeout)
        except OSError:
            link.close(reset=True)     # the server is down: the client sees it refused
            return
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with link.lock:
            if link.closed.is_set():
                _reset(up)
                return
            link.upstream = up
        self._spawn(self._pump, link, up, link.client, "down", name=f"relay-{self.port}-down")
        self._pump(link, link.client, up, "up")

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket, direction: str) -> None:
        half_closed = False
        try:
            while self._wait_flowing(link):
                try:
                    ready, _, _ = select.select([src], [], [], _POLL)
                except (OSError, ValueError):
                    break
                if not ready or not self._flowing.is_set():
                    continue
                data = src.recv(_CHUNK)
                if not data:
                    try:
                        dst.shutdown(socket.SHUT_WR)   # pass the FIN on
                    except OSError:
                        break
                    with link.lock:
                        link.eofs += 1
                        half_closed = link.eofs < 2    # the other direction may still flow
                    return
                if direction == "down":
                    fault = None
                    with self._arm_lock:
                        armed = self._armed
                        if armed is not None:
                            if len(data) >= armed[0]:
                                fault, self._armed = armed, None
                            else:
                                armed[0] -= len(data)
                    if fault is not None:          # forward up to the mark, then strike
                        head, data = data[:fault[0]], data[fault[0]:]
                        if head and self._wait_flowing(link):
                            dst.sendall(head)
                            self.bytes_down += len(head)
                        fault[1]()
                        fault[2].set()
                        if not data:
                            continue
                if not self._wait_flowing(link):    # frozen between recv and send: hold it
                    break
                dst.sendall(data)
                if direction == "up":
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
        except OSError:
            pass
        finally:
            if not half_closed:
                link.close()
