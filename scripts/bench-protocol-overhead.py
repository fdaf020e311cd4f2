#!/usr/bin/env python3
"""Server CPU per streamed token, by protocol: chat completions SSE, the
Responses API over SSE, Anthropic's Messages over SSE (issue 36's target:
the agent protocols cost at most 10% more than chat completions).

Starts `nexus serve` on stories260K (one engine thread), then in alternated
rounds streams the same greedy request through each protocol (ignore_eos is
not in every protocol, so a long max_tokens and a prompt the model continues
for long), and reads the server process's CPU time (the sum of its threads'
/proc/PID/task/*/schedstat) around each request. Prints per protocol the median over the
rounds of CPU microseconds per streamed token, and the ratio to chat.

Usage: scripts/bench-protocol-overhead.py BUILD_DIR [ROUNDS] [MAX_TOKENS]
"""
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 400
here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(here, "..", "..", "shared", "models", "stories260K.gguf")
prompt = "Once upon a time there was a little girl named Lily. She loved to play outside in the park."

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen([os.path.join(build, "src", "nexus"), "serve", "-m", model, "--port", str(port),
                           "--threads", "1"], stderr=subprocess.DEVNULL)


def cpu_s():
    # Nanoseconds on a CPU of every thread (schedstat's first field): the
    # clock-tick counters of /proc/PID/stat are too coarse for one request.
    total = 0
    for t in os.listdir(f"/proc/{server.pid}/task"):
        try:
            with open(f"/proc/{server.pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def stream(path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return data


def chat():
    d = stream("/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                                        "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    usage = [json.loads(l[6:]) for l in d.splitlines() if l.startswith("data: {") and '"usage":{' in l]
    return usage[-1]["usage"]["completion_tokens"]


def responses():
    d = stream("/v1/responses", {"input": prompt, "max_output_tokens": max_tokens, "temperature": 0, "stream": True,
                                 "store": False})
    last = [json.loads(l[6:]) for l in d.splitlines() if l.startswith("data: {")][-1]
    return last["response"]["usage"]["output_tokens"]


def messages():
    d = stream("/v1/messages", {"model": "stories260K", "max_tokens": max_tokens, "temperature": 0, "stream": True,
                                "messages": [{"role": "user", "content": prompt}]})
    delta = [json.loads(l[6:]) for l in d.splitlines() if l.startswith("data: {") and "message_delta" in l][-1]
    return delta["usage"]["output_tokens"]


try:
    for _ in range(100):
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/health")
            break
        except OSError:
            time.sleep(0.1)
    protocols = {"chat": chat, "responses": responses, "messages": messages}
    for f in protocols.values():
        f()  # warm-up
    per_token = {k: [] for k in protocols}
    for _ in range(rounds):
        for name, f in protocols.items():
            before = cpu_s()
            n = f()
            per_token[name].append((cpu_s() - before) / max(n, 1) * 1e6)
    base = statistics.median(per_token["chat"])
    for name, v in per_token.items():
        med = statistics.median(v)
        print(f"{name:10s} {med:7.1f} us CPU per streamed token (median of {rounds}; min {min(v):.1f}, "
              f"max {max(v):.1f}) {med / base:5.2f}x chat")
finally:
    server.terminate()
    server.wait()
