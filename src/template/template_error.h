// TemplateError: every failure of parsing or rendering a Jinja template.
#pragma once

#include <stdexcept>
#include <string>

namespace nexus::tmpl {

class TemplateError : public std::runtime_error {
 public:
  enum class Kind {
    Syntax,   // the source does not parse (message names the line)
    Runtime,  // a type error, an unknown filter/test/function/method (named), ...
    Raised,   // the template called raise_exception(message): message is the template's
    Limit,    // a sandbox limit (output bytes, loop iterations, steps, depth) was reached
  };
  TemplateError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

[[noreturn]] inline void runtime_error(const std::string& message) {
  throw TemplateError(TemplateError::Kind::Runtime, message);
}

}  // namespace nexus::tmpl
