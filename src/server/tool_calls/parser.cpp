#include "server/tool_calls/parser.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace nexus::server::tool_calls {

namespace {

enum class Status { Done, Incomplete, Failed };

// Done: pos is just past what was scanned; Incomplete: the text ended first
// (pos = its size); Failed: pos is the offending byte.
struct Scan {
  Status status;
  size_t pos;
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view t, size_t i) {
  while (i < t.size() && is_ws(t[i])) ++i;
  return i;
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  return s;
}

// `lit` at i: Done past it, Incomplete when the text ends inside it.
Scan expect(std::string_view t, size_t i, std::string_view lit) {
  const std::string_view rest = t.substr(std::min(i, t.size()));
  if (rest.size() >= lit.size()) return rest.substr(0, lit.size()) == lit ? Scan{Status::Done, i + lit.size()}
                                                                         : Scan{Status::Failed, i};
  return lit.substr(0, rest.size()) == rest ? Scan{Status::Incomplete, t.size()} : Scan{Status::Failed, i};
}

// A JSON string starting at t[i] == '"'.
Scan scan_string(std::string_view t, size_t i) {
  for (size_t k = i + 1; k < t.size(); ++k) {
    if (t[k] == '\\') { ++k; continue; }
    if (t[k] == '"') return {Status::Done, k + 1};
    if (static_cast<unsigned char>(t[k]) < 0x20) return {Status::Failed, k};
  }
  return {Status::Incomplete, t.size()};
}

// Any JSON value at i (nesting followed with a stack of closers, not
// recursion). Not a validator beyond the structure: the grammar or the
// client checks the values.
Scan scan_value(std::string_view t, size_t i) {
  if (i >= t.size()) return {Status::Incomplete, t.size()};
  const char c = t[i];
  if (c == '"') return scan_string(t, i);
  if (c == '{' || c == '[') {
    std::string closers(1, c == '{' ? '}' : ']');
    for (size_t k = i + 1; k < t.size(); ++k) {
      const char d = t[k];
      if (d == '"') {
        const Scan s = scan_string(t, k);
        if (s.status != Status::Done) return s;
        k = s.pos - 1;
      } else if (d == '{' || d == '[') {
        closers.push_back(d == '{' ? '}' : ']');
      } else if (d == '}' || d == ']') {
        if (d != closers.back()) return {Status::Failed, k};
        closers.pop_back();
        if (closers.empty()) return {Status::Done, k + 1};
      }
    }
    return {Status::Incomplete, t.size()};
  }
  if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
    size_t k = i;
    while (k < t.size() && (std::isalnum(static_cast<unsigned char>(t[k])) || t[k] == '-' || t[k] == '+' || t[k] == '.'))
      ++k;
    if (k == t.size()) return {Status::Incomplete, k};
    const std::string_view word = t.substr(i, k - i);
    if ((c == 't' && word != "true") || (c == 'f' && word != "false") || (c == 'n' && word != "null"))
      return {Status::Failed, i};
    return {Status::Done, k};
  }
  return {Status::Failed, i};
}

std::string decode_string(std::string_view quoted) {
  const auto j = parse_json_bounded_or_discarded(quoted);
  return j.is_string() ? j.get<std::string>() : std::string();
}

// One call object at i.
struct CallScan {
  Scan scan{Status::Incomplete, 0};
  bool named = false;
  std::string name;
  bool has_args = false, args_string = false, args_done = false;
  size_t args_begin = 0, args_end = 0;
};

CallScan scan_call(std::string_view t, size_t i, const ParserOptions& o) {
  CallScan c;
  const auto stop = [&](Status s, size_t pos) {
    c.scan = {s, pos};
    if (c.has_args && !c.args_done) c.args_end = std::min(pos, t.size());
    return c;
  };
  if (i >= t.size()) return stop(Status::Incomplete, t.size());
  if (t[i] != '{') return stop(Status::Failed, i);
  ++i;
  for (bool first = true;; first = false) {
    i = skip_ws(t, i);
    if (i >= t.size()) return stop(Status::Incomplete, t.size());
    if (first && t[i] == '}') return stop(Status::Failed, i);  // {} names no function
    if (t[i] != '"') return stop(Status::Failed, i);
    const Scan ks = scan_string(t, i);
    if (ks.status != Status::Done) return stop(ks.status, ks.pos);
    const std::string key = decode_string(t.substr(i, ks.pos - i));
    i = skip_ws(t, ks.pos);
    if (i >= t.size()) return stop(Status::Incomplete, t.size());
    if (t[i] != ':') return stop(Status::Failed, i);
    i = skip_ws(t, i + 1);
    if (i >= t.size()) return stop(Status::Incomplete, t.size());
    const bool is_args = key == "arguments" || key == "parameters";
    if (key == "name" && t[i] != '"') return stop(Status::Failed, i);
    if (is_args && !c.has_args) {
      c.has_args = true;
      c.args_begin = i;
      c.args_string = t[i] == '"';
    }
    const Scan vs = scan_value(t, i);
    if (vs.status != Status::Done) return stop(vs.status, vs.pos);
    if (key == "name") {
      c.name = decode_string(t.substr(i, vs.pos - i));
      if (std::find(o.names.begin(), o.names.end(), c.name) == o.names.end()) return stop(Status::Failed, i);
      c.named = true;
    } else if (is_args && c.args_begin == i) {
      c.args_done = true;
      c.args_end = vs.pos;
    }
    i = skip_ws(t, vs.pos);
    if (i >= t.size()) return stop(Status::Incomplete, t.size());
    if (t[i] == ',') { ++i; continue; }
    if (t[i] != '}') return stop(Status::Failed, i);
    if (!c.named) return stop(Status::Failed, i);
    return stop(Status::Done, i + 1);
  }
}

ParsedCall to_call(std::string_view t, const CallScan& c) {
  ParsedCall p;
  p.name = c.name;
  p.complete = c.scan.status == Status::Done;
  if (!c.has_args) {
    if (p.complete) p.arguments = "{}";
  } else if (c.args_string) {
    if (c.args_done) p.arguments = decode_string(t.substr(c.args_begin, c.args_end - c.args_begin));
  } else {
    p.arguments = std::string(t.substr(c.args_begin, c.args_end - c.args_begin));
  }
  return p;
}

// The calls of one body (what follows a marker or an opener).
struct Body {
  std::vector<CallScan> calls;
  Scan scan{Status::Incomplete, 0};
  bool started() const {
    return std::any_of(calls.begin(), calls.end(), [](const CallScan& c) { return c.named; });
  }
};

// `[ call (, call)* ]` then `tail` (Generic's closing "}").
Body scan_list(std::string_view t, size_t i, const ParserOptions& o, std::string_view tail) {
  Body b;
  i = skip_ws(t, i);
  if (Scan s = expect(t, i, "["); s.status != Status::Done) { b.scan = s; return b; }
  i = i + 1;
  for (;;) {
    b.calls.push_back(scan_call(t, skip_ws(t, i), o));
    const Scan& cs = b.calls.back().scan;
    if (cs.status != Status::Done) { b.scan = cs; return b; }
    i = skip_ws(t, cs.pos);
    if (i >= t.size()) { b.scan = {Status::Incomplete, t.size()}; return b; }
    if (t[i] == ',') { ++i; continue; }
    if (t[i] != ']') { b.scan = {Status::Failed, i}; return b; }
    ++i;
    break;
  }
  if (!tail.empty()) {
    b.scan = expect(t, skip_ws(t, i), tail);
    return b;
  }
  b.scan = {Status::Done, i};
  return b;
}

Body scan_body(std::string_view t, size_t i, const ParserOptions& o) {
  switch (o.syntax) {
    case ToolSyntax::Hermes: {
      Body b;
      b.calls.push_back(scan_call(t, skip_ws(t, i), o));
      const Scan& cs = b.calls.back().scan;
      b.scan = cs.status != Status::Done ? cs : expect(t, skip_ws(t, cs.pos), "</tool_call>");
      return b;
    }
    case ToolSyntax::Mistral: return scan_list(t, i, o, "");
    case ToolSyntax::Generic: return scan_list(t, i, o, "}");
    case ToolSyntax::Llama3: {
      Body b;
      for (;;) {
        b.calls.push_back(scan_call(t, i, o));
        const Scan& cs = b.calls.back().scan;
        if (cs.status != Status::Done) { b.scan = cs; return b; }
        size_t k = skip_ws(t, cs.pos);
        if (k < t.size() && t[k] == ';') k = skip_ws(t, k + 1);
        if (k >= t.size()) { b.scan = {Status::Incomplete, t.size()}; return b; }
        if (t[k] != '{') { b.scan = {Status::Done, cs.pos}; return b; }
        i = k;
      }
    }
  }
  return {};
}

// Llama3 and Generic calls are the whole message: where its body starts, or
// Failed (plain content), or Incomplete (cannot tell yet).
Scan opener(std::string_view t, ToolSyntax syntax) {
  size_t i = skip_ws(t, 0);
  if (syntax == ToolSyntax::Llama3) {
    const Scan tag = expect(t, i, marker(syntax));
    if (tag.status == Status::Incomplete) return tag;
    if (tag.status == Status::Done) i = skip_ws(t, tag.pos);
    const Scan brace = expect(t, i, "{");
    if (brace.status != Status::Done) return brace;
    const Scan key = expect(t, skip_ws(t, brace.pos), "\"name\"");
    return key.status == Status::Done ? Scan{Status::Done, i} : key;
  }
  Scan s = expect(t, i, "{");
  if (s.status != Status::Done) return s;
  s = expect(t, skip_ws(t, s.pos), "\"tool_calls\"");
  if (s.status != Status::Done) return s;
  s = expect(t, skip_ws(t, s.pos), ":");
  return s;  // the list follows
}

// The body's named calls, in order.
void take_calls(std::string_view t, const Body& b, ParsedMessage& out) {
  for (const CallScan& c : b.calls)
    if (c.named) out.calls.push_back(to_call(t, c));
}

}  // namespace

ParsedMessage parse_output(std::string_view t, bool final, const ParserOptions& o) {
  ParsedMessage out;
  // At the end of the output an unfinished body is as good as broken.
  const auto ended = [&](const Scan& s) { return s.status == Status::Failed || (final && s.status == Status::Incomplete); };
  if (o.syntax == ToolSyntax::Llama3 || o.syntax == ToolSyntax::Generic) {
    const Scan op = opener(t, o.syntax);
    if (ended(op)) {
      out.content = std::string(t);
    } else if (op.status == Status::Done) {
      const Body b = scan_body(t, op.pos, o);
      if (!b.started() && ended(b.scan)) {
        out.content = std::string(t);
      } else {
        take_calls(t, b, out);
        if (b.scan.status == Status::Failed) out.content = std::string(t.substr(b.scan.pos));
        else if (b.scan.status == Status::Done) out.content = std::string(ltrim(t.substr(b.scan.pos)));
      }
    }
  } else {
    const std::string_view mk = marker(o.syntax);
    size_t i = 0;
    bool after_call = false;
    for (;;) {
      const size_t m = t.find(mk, i);
      std::string_view seg = t.substr(i, m == std::string_view::npos ? std::string_view::npos : m - i);
      if (after_call) seg = ltrim(seg);
      if (m == std::string_view::npos) {
        if (!final) {
          // Hold back a tail that may be the start of the marker.
          for (size_t k = std::min(seg.size(), mk.size() - 1); k > 0; --k) {
            if (mk.substr(0, k) == seg.substr(seg.size() - k)) {
              seg.remove_suffix(k);
              break;
            }
          }
          seg = rtrim(seg);
        }
        out.content += seg;
        break;
      }
      const Body b = scan_body(t, m + mk.size(), o);
      if (!b.started()) {
        if (ended(b.scan)) {
          out.content += seg;
          out.content += t.substr(m);
        } else {
          out.content += rtrim(seg);
        }
        break;
      }
      out.content += rtrim(seg);
      take_calls(t, b, out);
      if (b.scan.status == Status::Failed) out.content += t.substr(b.scan.pos);
      if (b.scan.status != Status::Done) break;
      i = b.scan.pos;
      after_call = true;
    }
  }
  if (out.calls.size() > o.max_calls) out.calls.resize(o.max_calls);
  return out;
}

}  // namespace nexus::server::tool_calls
