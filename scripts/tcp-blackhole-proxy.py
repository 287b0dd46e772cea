#!/usr/bin/env python3
"""A TCP proxy on loopback that a test can turn into a black hole.

    tcp-blackhole-proxy.py UPSTREAM_HOST UPSTREAM_PORT

Listens on 127.0.0.1 on a free port and prints `listening PORT` on standard output. Then reads commands
on standard input, one per line, and acknowledges each on standard output once it holds:
- `hole`: the network to the server becomes a black hole, for good for the connections open now: as
  when packets to a server are dropped until its peers' connections die, or the path to it is
  replaced (a failover, a NAT that forgot its state). Nothing more is forwarded on the connections
  open now, in either direction, and they are never closed by the proxy (a silent peer); bytes sent
  on them are read and discarded. New connections are accepted but dead too, as long as the hole
  lasts. Answers `hole on`.
- `pass`: new connections are forwarded again (the dead ones stay dead). Answers `hole off`.
- `stats`: answers `stats CONNECTIONS DEAD DISCARDED_BYTES`: connections accepted so far, those that
  died in the hole, and the bytes discarded (proof that traffic met the hole).
When a client closes a dead connection, the proxy closes its upstream side, so the server ends that
session (and rolls back its transaction) as it would once TCP gives up. The proxy exits, dropping
every connection, when standard input ends (so it never outlives the test that started it) or on
SIGTERM. Upstream is loopback only: the proxy refuses any other address.

Commands, not signals: a child inherits its parent's blocked-signal mask, and a test process (its
threads block most signals) starts a proxy deaf to SIGUSR1, SIGUSR2 and SIGTERM.
"""
import asyncio
import ipaddress
import os
import signal
import socket
import sys


def loopback_only(host: str) -> str:
    address = ipaddress.ip_address(socket.gethostbyname(host))
    if not address.is_loopback:
        sys.exit(f"tcp-blackhole-proxy: {host} is not a loopback address")
    return str(address)


async def main() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    upstream_host, upstream_port = loopback_only(sys.argv[1]), int(sys.argv[2])
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: os._exit(0))
    hole = {"on": False}
    counts = {"connections": 0, "dead": 0, "discarded": 0}
    live: set["Link"] = set()

    class Link:
        """One client connection and its upstream; `dead` once a hole met it."""

        def __init__(self) -> None:
            self.dead = False

        def die(self) -> None:
            if not self.dead:
                self.dead = True
                counts["dead"] += 1

    async def pump(
        link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None, to_client: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                if link.dead or writer is None:
                    counts["discarded"] += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            # A dead link's client side is never closed: the peer it thinks it talks to is silent.
            if writer is not None and not (to_client and link.dead):
                writer.close()

    async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        counts["connections"] += 1
        link = Link()
        if hole["on"]:
            link.die()
            # Until the client gives up; the server never hears of it.
            await pump(link, client_reader, None, to_client=False)
            client_writer.close()
            return
        live.add(link)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(upstream_host, upstream_port)
        except OSError:
            client_writer.close()
            return
        try:
            # Dead links: the client's bytes are discarded until it closes (then upstream is closed), and
            # what the server sends is discarded; the client's side is never closed by the proxy.
            upstream = asyncio.ensure_future(pump(link, upstream_reader, client_writer, to_client=True))
            await pump(link, client_reader, upstream_writer, to_client=False)
            if link.dead:
                upstream.cancel()
            try:
                await upstream
            except asyncio.CancelledError:
                pass
        finally:
            live.discard(link)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)

    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while line := await commands.readline():
        command = line.decode().strip()
        if command == "hole":
            hole["on"] = True
            for link in live:
                link.die()
            print("hole on", flush=True)
        elif command == "pass":
            hole["on"] = False
            print("hole off", flush=True)
        elif command == "stats":
            print(f"stats {counts['connections']} {counts['dead']} {counts['discarded']}", flush=True)
        else:
            print(f"unknown command {command!r}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
