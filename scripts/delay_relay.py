#!/usr/bin/env python3
"""A TCP relay that delays every byte by a fixed time in each direction.

Usage: delay_relay.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

For benchmarks on loopback, where this machine's kernel has no netem qdisc:
it stands for the network between a client and a nearby data centre (1 ms
each way = a 2 ms round trip). Listens on 127.0.0.1 only; prints
"relaying 127.0.0.1:LISTEN_PORT" once it accepts. Data keeps its order; each
chunk goes out DELAY_MS after it was read (asyncio timers: ~0.1 ms jitter).
"""
import asyncio
import socket
import sys
import time


async def pump(reader, writer, delay):
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except OSError:
            pass

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((time.monotonic() + delay, data or None))
            if not data:
                break
    except OSError:
        queue.put_nowait((0, None))
    await sender


async def main():
    listen, host, port, delay_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    delay = delay_ms / 1000.0

    async def handle(client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        for w in (client_w, up_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pump(client_r, up_w, delay), pump(up_r, client_w, delay), return_exceptions=True)
        for w in (client_w, up_w):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print(f"relaying 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
