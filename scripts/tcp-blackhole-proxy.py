#!/usr/bin/env python3
"""A TCP proxy on loopback that a test can turn into a black hole.

    tcp-blackhole-proxy.py UPSTREAM_HOST UPSTREAM_PORT

Listens on 127.0.0.1 on a free port and prints `listening PORT` on standard output. SIGUSR1 starts a
black hole: nothing is forwarded in either direction and new connections are not passed on, as when a
network drops every packet. SIGUSR2 ends it: what TCP would have retransmitted arrives, as it would
after a real outage shorter than the peers' timeouts. SIGTERM stops the proxy. Upstream is loopback
only: the proxy refuses any other address.
"""
import asyncio
import ipaddress
import signal
import socket
import sys


def loopback_only(host: str) -> str:
    address = ipaddress.ip_address(socket.gethostbyname(host))
    if not address.is_loopback:
        sys.exit(f"tcp-blackhole-proxy: {host} is not a loopback address")
    return str(address)


async def main() -> None:
    upstream_host, upstream_port = loopback_only(sys.argv[1]), int(sys.argv[2])
    passing = asyncio.Event()
    passing.set()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, passing.clear)
    loop.add_signal_handler(signal.SIGUSR2, passing.set)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await passing.wait()  # held, not dropped: TCP would retransmit it
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await passing.wait()  # a connection attempt into a black hole waits for the SYN to get through
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(upstream_host, upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, upstream_writer), pump(upstream_reader, client_writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
