#include "template/jinja.h"

#include "template/interpreter.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace nexus::tmpl {

struct NodeListHolder {
  NodeList program;
};

Template::Template(std::string_view source) {
  auto h = std::make_shared<NodeListHolder>();
  h->program = parse(tokenize(source));
  program_ = std::move(h);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u))
                                                   : Value::number(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      ObjectMap m;
      for (const auto& [k, v] : j.items()) m.set(k, from_json(v));
      return Value::object(std::move(m));
    }
    default: return Value();
  }
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& opts) const {
  Interpreter in(opts.limits);
  Env* globals = in.new_env(nullptr);
  install_globals(in, *globals, opts);
  if (context.is_object()) {
    for (const auto& [k, v] : context.items()) globals->vars.set(k, from_json(v));
  }
  return in.render(program_->program, globals);
}

}  // namespace nexus::tmpl
