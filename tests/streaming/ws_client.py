#!/usr/bin/python3
"""A WebSocket client of the CRI streaming server, on Python's `websockets`
(an implementation of RFC 6455 independent of the server's): the tests'
second client, beside crictl's SPDY.

  ws_client.py exec URL PROTOCOL [STDIN]   -> JSON {channels, status}
  ws_client.py portforward URL PROTOCOL REQUEST  -> JSON {data, error, ports}

With PROTOCOL v5.channel.k8s.io, STDIN is sent, then its end ([255, 0]).
"""
import asyncio
import base64
import json
import sys

import websockets


def ws_url(url):
    return "ws://" + url.split("://", 1)[1]


def decode(msg, b64):
    if b64:
        return msg[0], base64.b64decode(msg[1:]) if len(msg) > 1 else b""
    return msg[0], bytes(msg[1:])


def encode(ch, data, b64):
    if b64:
        return str(ch) + base64.b64encode(data).decode()
    return bytes([ch]) + data


async def exec_(url, proto, stdin):
    b64 = "base64" in proto
    channels = {}
    first = None
    async with websockets.connect(ws_url(url), subprotocols=[proto], max_size=None) as ws:
        if stdin is not None:
            await ws.send(encode(0, stdin.encode(), b64))
            if proto == "v5.channel.k8s.io":
                await ws.send(bytes([255, 0]))
        try:
            async for msg in ws:
                ch, data = decode(msg, b64)
                if first is None:
                    first = [ch, len(data)]
                channels.setdefault(str(ch), b"")
                channels[str(ch)] += data
        except websockets.ConnectionClosed:
            pass
    print(json.dumps({
        "protocol": proto,
        "first": first,
        "channels": {k: v.decode(errors="replace") for k, v in channels.items()},
    }))


async def portforward(url, proto, request):
    b64 = "base64" in proto
    data, error, ports = b"", b"", []
    async with websockets.connect(ws_url(url), subprotocols=[proto], max_size=None) as ws:
        # Each channel first says its port (2 bytes, little-endian).
        for _ in range(2):
            ch, d = decode(await ws.recv(), b64)
            ports.append([ch, int.from_bytes(d, "little")])
        await ws.send(encode(0, request.encode(), b64))
        try:
            async for msg in ws:
                ch, d = decode(msg, b64)
                if ch == 0:
                    data += d
                elif ch == 1:
                    error += d
        except websockets.ConnectionClosed:
            pass
    print(json.dumps({"ports": ports, "data": data.decode(errors="replace"),
                      "error": error.decode(errors="replace")}))


def main():
    verb, url, proto = sys.argv[1:4]
    rest = sys.argv[4] if len(sys.argv) > 4 else None
    if verb == "exec":
        asyncio.run(exec_(url, proto, rest))
    else:
        asyncio.run(portforward(url, proto, rest or ""))


if __name__ == "__main__":
    main()
