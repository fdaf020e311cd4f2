#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gateway (fuzz/corpus_fuzz_gateway/).

fuzz_gateway reads its input with libFuzzer's FuzzedDataProvider: strings
from the front (ConsumeRandomLengthString: a backslash followed by any other
byte ends a string, two backslashes are one), numbers and booleans from the
back. A seed is: target, Authorization, WebSocket subprotocols, body, up to
8 realtime events, a replica's stream (strings, in that order); then, from
the last byte backwards: the replica index, one boolean per event (and a
false one after them), the sizes of the stream's reads.

Usage: fuzz/make_corpus_gateway.py [OUT_DIR]   (default: fuzz/corpus_fuzz_gateway)
The files are committed; rerun only to change the seeds.
"""
import json
import os
import sys

SEP = b"\\x"  # ends a string (a backslash, then a byte that is not one)


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return b.replace(b"\\", b"\\\\") + SEP


def seed(target, auth="", protocols="", body="", events=(), stream="", reads=(), replica=0):
    front = string(target) + string(auth) + string(protocols) + string(body)
    front += b"".join(string(e) for e in events) + string(stream)
    back = bytes(min(255, max(1, r)) for r in reversed(reads))  # read sizes, consumed from the end
    back += b"\x00" if len(events) < 8 else b""               # the boolean that stops the events
    back += b"\x01" * len(events)
    return front + back + bytes([replica])


def sse(*chunks):
    return "".join("data: " + (c if isinstance(c, str) else json.dumps(c, separators=(",", ":"))) + "\n\n"
                   for c in chunks)


USAGE = {"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
TEXT = {"id": "x", "choices": [{"text": "a", "index": 0}], "usage": None}

SEEDS = {
    "completion_prefix": seed("/v1/completions", "Bearer sk-a", "",
                              json.dumps({"prompt": "Once upon a time " * 20, "max_tokens": 8}),
                              stream=sse(TEXT, TEXT, USAGE, "[DONE]"), reads=(7, 50, 3), replica=1),
    "chat_stream_usage": seed("/v1/chat/completions", "Bearer sk-b", "",
                              json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                                       {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                                          "stream": True, "stream_options": {"include_usage": True}}),
                              stream=sse(TEXT, USAGE, "[DONE]"), reads=(1, 1, 1, 200), replica=2),
    "absolute_form_subprotocol": seed("http://127.0.0.1:8080/v1/realtime?model=x", "",
                                      "nexus-api-key.sk-c, realtime", "",
                                      stream=": comment\n\n" + sse(TEXT) + "data: {\"partial", reads=(9,)),
    "deep_body": seed("HTTPS://gw/v1/completions", "Bearer sk-a", "",
                      '{"stream":true,"prompt":' + "[" * 200 + "]" * 200 + "}",
                      stream="data: {\"choices\":[{\"text\":\"" + "x" * 5000, reads=(255, 255, 255)),
    "token_ids_batch": seed("/v1/completions", "Bearer nope", "",
                            json.dumps({"prompt": [[1, 2, 3] * 40], "stream": False}),
                            stream=json.dumps({"usage": {"prompt_tokens": 3, "completion_tokens": 1}})),
    "straddled_blank_lines": seed("/v1/completions", "bearer sk-a", "", json.dumps({"stream": True, "prompt": "x"}),
                                  stream=sse(TEXT, TEXT) + "data: [DONE]\n\n", reads=(33, 1, 1, 40, 1)),
    "realtime_turns": seed("/v1/realtime", "", "", "", events=(
        json.dumps({"type": "session.update", "session": {"temperature": 0, "max_tokens": 8}}),
        json.dumps({"type": "session.updated", "session": {"id": "s1", "temperature": 0, "system": "hi"}}),
        json.dumps({"type": "input.append", "message": {"role": "user", "content": "Once upon a time"}}),
        json.dumps({"type": "response.created", "response": {"id": "r1"}}),
        json.dumps({"type": "response.create"}),
        json.dumps({"type": "response.delta", "text": " there was"}),
        json.dumps({"type": "input.append", "text": "raw text"}),
        json.dumps({"type": "response.done", "response": {"id": "r1", "finish_reason": "stop"}}),
    )),
    "realtime_refusals": seed("/realtime", "", "", "", events=(
        json.dumps({"type": "response.redirect", "message": {"role": "user", "content": "no"}}),
        json.dumps({"type": "error", "error": {"code": "context_length_exceeded", "event": "response.create"}}),
        json.dumps({"type": "input.append", "message": {"role": "user", "content": "x" * 100}}),
        json.dumps({"type": "error", "error": {"code": "input_too_large", "event": "input.append"}}),
        "{\"type\":\"session.update\",\"session\":" + "[" * 300 + "]" * 300 + "}",
    )),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "corpus_fuzz_gateway")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name + ".seed"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
