#!/usr/bin/env python3
"""Writes the issue-42 seeds of the JSON-facing fuzz targets: the shapes of
the queries of death that the fuzzers had never reached, and small versions
of the same requests for json_mutator.h to deepen.

  fuzz/corpus_fuzz_http/issue42-*.seed       raw HTTP requests
  fuzz/corpus_fuzz_realtime/issue42-*.seed   realtime client events, one a line
  fuzz/corpus_json_schema/issue42-*.json     JSON schemas

Nesting, where the issue had 20,000-100,000 levels: as deep as the code
before the fix (1cf2e85) needed to overflow its stack under ASan, within the
fuzz server's 64 KiB body limit, so the corpus stays small: DEEP (12,000;
the Jinja conversion of tool calls, and nlohmann's dump() already at
10,000), DEEP_REALTIME (20,000: a session.update held 12,000) and
DEEP_SCHEMA (32,000: a schema's ordered_json copies held 20,000). The GBNF
and enum seeds have the issue's own sizes.

Usage: fuzz/make_json_corpus.py [FUZZ_DIR]   (default: the folder of this file)
The files are committed; rerun only to change the seeds.
"""
import json
import os
import sys

DEEP = 12000
DEEP_REALTIME = 20000
DEEP_SCHEMA = 32000
USER = {"role": "user", "content": "hi"}


def nested(n, inner="1"):
    """n nested arrays around inner: written as text, never built as a value."""
    return "[" * n + inner + "]" * n


def with_hole(value, hole, text):
    """json.dumps(value) with the string hole (a placeholder) replaced by raw text."""
    out = json.dumps(value, separators=(",", ":"))
    assert out.count(json.dumps(hole)) == 1
    return out.replace(json.dumps(hole), text)


def post(target, body):
    data = body.encode()
    head = (f"POST {target} HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n")
    return head.encode() + data


def chat(**fields):
    return {"messages": [USER], "max_tokens": 2, **fields}


def tool_call(args, extra=None):
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": args}}
    if extra is not None:
        call["x"] = extra
    return {"messages": [USER, {"role": "assistant", "tool_calls": [call]}], "max_tokens": 2}


def tool(parameters):
    return {"type": "function", "function": {"name": "f", "parameters": parameters}}


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}


def gbnf_alternatives(n):
    return "root ::= " + "|".join(['"x"'] * n)


def gbnf_groups(n):
    return "root ::= " + "(" * n + '"x"' + ")" * n


def gbnf_chain(n):
    """A chain of n leading references: r0 ::= r1, r1 ::= r2, ..., rn ::= "y"."""
    return "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1}\n" for i in range(n)) + f'r{n} ::= "y"'


def enum_schema(n):
    return {"enum": [str(i) for i in range(n)]}


HOLE = "@@hole@@"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def http_seeds():
    deep, deep_schema = nested(DEEP), nested(DEEP_SCHEMA)
    return {
        # The issue's crashes: deep JSON in a chat request.
        "tool-calls-arguments-deep": post(CHAT, with_hole(tool_call({"a": HOLE}), HOLE, deep)),
        "tool-calls-extra-field-deep": post(CHAT, with_hole(tool_call("{}", HOLE), HOLE, deep)),
        "tools-parameters-deep-tool-choice-none": post(CHAT, with_hole(
            chat(tools=[tool({"type": "object", "x": HOLE})], tool_choice="none"), HOLE, deep_schema)),
        "response-format-schema-deep": post(CHAT, with_hole(
            chat(response_format=schema_format({"type": "object", "x": HOLE})), HOLE, deep_schema)),
        # GBNF: 10,000 nested groups; 5,000 alternatives and an enum of 5,000
        # strings (past the matcher's 4,096 stacks: 500s at generation).
        "gbnf-groups-10000": post(COMPLETIONS, json.dumps({"prompt": "a", "max_tokens": 4,
                                                             "grammar": gbnf_groups(10000)})),
        "gbnf-alternatives-5000": post(COMPLETIONS, json.dumps({"prompt": "a", "max_tokens": 4,
                                                                 "grammar": gbnf_alternatives(5000)})),
        "response-format-enum-5000": post(CHAT, json.dumps(chat(response_format=schema_format(enum_schema(5000))),
                                                            separators=(",", ":"))),
        "gbnf-chain-200": post(COMPLETIONS, json.dumps({"prompt": "a", "max_tokens": 4, "grammar": gbnf_chain(200)})),
        # The same requests, small: what the mutator wraps, repeats and grows.
        "tool-calls": post(CHAT, json.dumps(tool_call('{"a":[1,{"b":"c"}]}', {"y": [1]}), separators=(",", ":"))),
        "tools-forced": post(CHAT, json.dumps(chat(
            tools=[tool({"type": "object", "properties": {"n": {"enum": ["a", "b"]}}, "required": ["n"]})],
            tool_choice="required", max_tokens=64), separators=(",", ":"))),
        "response-format-schema": post(CHAT, json.dumps(chat(response_format=schema_format(
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}),
            max_tokens=64), separators=(",", ":"))),
        "gbnf": post(COMPLETIONS, json.dumps({"prompt": "a", "max_tokens": 64, "stop": ["z"],
                                              "grammar": 'root ::= ("x" | [a-c]+) item*\nitem ::= "," [0-9]'})),
        "limit-127-extra": post(COMPLETIONS, with_hole({"prompt": "a", "max_tokens": 2, "extra": HOLE}, HOLE,
                                                       nested(126))),
    }


def realtime_seeds():
    def update(setting, text):
        return with_hole({"type": "session.update", "session": {setting: HOLE}}, HOLE, text)

    turn = ('{"type":"input.append","text":"Once"}\n'
            '{"type":"response.create","response":{"max_tokens":2}}')
    return {
        "session-update-deep-stop-temperature": "\n".join(
            [update("stop", nested(DEEP_REALTIME, '"x"')), update("temperature", nested(DEEP_REALTIME)),
             turn]).encode(),
        # The first finding of the mutator (a harness bug): an error event
        # over 4 KiB, which Beast sends in fragments, echoing a long type.
        "long-event-type": json.dumps({"type": "\\" * 3000}).encode(),
        "session-update": "\n".join([
            '{"type":"session.update","session":{"stop":["x","y"],"temperature":0.5,"max_tokens":3}}',
            '{"type":"input.append","message":{"role":"user","content":"hi"}}', turn]).encode(),
    }


def schema_seeds():
    return {
        "enum-5000": json.dumps(enum_schema(5000), separators=(",", ":")).encode(),
        "pattern-groups-200": json.dumps({"type": "string", "pattern": "(" * 200 + "a" + ")" * 200}).encode(),
        # Type lists: compiled in time quadratic in their length before 1c39079
        # (fuzz_json_schema's finding; 2,000 took over 10 s under ASan);
        # a repeated type is refused now.
        "type-list-300": json.dumps({"type": ["string"] * 300}, separators=(",", ":")).encode(),
        "type-list-2000": json.dumps({"type": ["string"] * 2000}, separators=(",", ":")).encode(),
        # The deep value before other members: an unbounded ordered_json
        # parse copies it when the object grows (fuzz_json_schema's finding).
        "deep-value-in-keyword": with_hole({"x": HOLE, "type": "object", "properties": {}}, HOLE,
                                           nested(DEEP)).encode(),
    }


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for folder, seeds, ext in (("corpus_fuzz_http", http_seeds(), ".seed"),
                               ("corpus_fuzz_realtime", realtime_seeds(), ".seed"),
                               ("corpus_json_schema", schema_seeds(), ".json")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        for name, data in seeds.items():
            data = data if isinstance(data, bytes) else data.encode()
            with open(os.path.join(root, folder, "issue42-" + name + ext), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
