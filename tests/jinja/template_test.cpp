// The Jinja interpreter on the language features chat templates use, and its sandbox.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja/template.h"
#include "support/test_paths.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar::jinja {
namespace {

std::string render(const std::string& source,
                   const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                   const RenderLimits& limits = {}) {
  return Template(source).render(context, limits);
}

struct Case {
  const char* source;
  const char* expected;
};

TEST(JinjaTemplate, RendersTheLanguageChatTemplatesUse) {
  const nlohmann::ordered_json context = {
      {"messages",
       {{{"role", "user"}, {"content", " hi "}},
        {{"role", "assistant"}, {"content", "<think>a</think>\n\nb"}}}},
      {"tools", {{{"name", "f"}, {"parameters", {{"type", "object"}, {"n", 1.5}}}}}},
      {"flag", false}};
  const Case cases[] = {
      {"{{ 'a' + 'b' }}", "ab"},
      {"{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }}",
       "7 3 -4 1 1024 0.5"},
      {"{{ messages[0].content | trim }}|{{ messages[0]['role'] }}", "hi|user"},
      {"{{ messages | length }}{{ messages[-1].role }}", "2assistant"},
      {"{% for m in messages %}{{ loop.index0 }}{{ m.role[0] }}{% if loop.last %}!{% endif %}{% "
       "endfor %}",
       "0u1a!"},
      {"{% for m in messages[::-1] %}{{ m.role }},{% endfor %}", "assistant,user,"},
      {"{{ messages[1].content.split('</think>')[-1].lstrip('\\n') }}", "b"},
      {"{{ messages[1].content.split('</think>')[0].split('<think>')[-1] }}", "a"},
      {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor "
       "%}{{ ns.n }}",
       "6"},
      {"{% set x = 1 %}{% for i in range(2) %}{% set x = 5 %}{% endfor %}{{ x }}", "1"},
      {"{{ tools[0] | tojson }}",
       "{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"n\": 1.5}}"},
      {"{{ {'a': [1, 2]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
      {"{{ 'x' if flag else 'y' }}{{ flag is false }}{{ nothing is defined }}{{ flag is not none "
       "}}",
       "yTrueFalseTrue"},
      {"{% if flag %}a{% elif 1 > 2 %}b{% else %}c{% endif %}", "c"},
      {"{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}{{ greet('bo') }}",
       "hi bo!"},
      {"{{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(', ') }}", "a, b"},
      {"{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{{ 'abc'[1:] }}{{ 'héllo'[1] }}{{ 'héllo' | length }}", "bcé5"},
      {"{{ 'tool_calls' in messages[1] }}{{ 'x' not in 'abc' }}", "FalseTrue"},
      {"  {%- if true %}\n  a\n  {%- endif %}\n", "  a"},
      {"{% if true %}\n  x\n{% endif %}\n", "  x\n"},
      {"{# comment #}{{ none }}|{{ true }}|{{ [1, 'a'] }}", "None|True|[1, 'a']"},
      {"{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue "
       "%}{% endif %}{{ i }}{% endfor %}",
       "02"},
      {"{% set s %}in{{ 1 }}{% endset %}{{ s | upper }}", "IN1"},
      {"{{ '%s' ~ 5 }}{{ 'a,b'.split(',') | first }}{{ [3, 1, 2] | sort | list }}",
       "%s5a[1, 2, 3]"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
      {"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join }}",
       " hi "},
      // Dicts compare by value, as in Python (Mistral's `message == user_messages[-1]`).
      {"{{ messages[0] == {'role': 'user', 'content': ' hi '} }}{{ messages[0] == messages[1] }}",
       "TrueFalse"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(render(c.source, context), c.expected) << c.source;
  }
}

TEST(JinjaTemplate, ErrorsNameTheTemplateLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"line one\n{{ 1 +\n}}", "template line 2"},
      {"a\nb\n{% if x %}", "missing '{% endif %}'"},
      {"\n\n{{ raise_exception('no tools here') }}", "template line 3: no tools here"},
      {"{{ missing.attribute }}", "template line 1: 'missing' is undefined"},
      {"\n{% for x in 5 %}{% endfor %}", "template line 2: 'int' object is not iterable"},
      {"{{ 1 // 0 }}", "division or modulo by zero"},
      {"{% frobnicate %}", "unknown tag 'frobnicate'"},
      {"{{ 'a' + 1 }}", "unsupported operand types"},
  };
  for (const auto& [source, message] : cases) {
    try {
      render(source);
      ADD_FAILURE() << source << " rendered";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos)
          << source << ": " << error.what();
    }
  }
}

TEST(JinjaTemplate, SandboxBoundsLoopsRecursionAndOutput) {
  RenderLimits limits;
  limits.max_steps = 10'000;
  limits.max_output_bytes = 1'000;
  EXPECT_THROW(render("{% for i in range(100000) %}{% endfor %}", {}, limits), Error);
  EXPECT_THROW(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, limits), Error);
  EXPECT_THROW(render("{{ 'x' * 100000 }}", {}, limits), Error);
  EXPECT_THROW(render("{% for i in range(900) %}ab{% endfor %}", {}, limits), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
               Error);
  for (const char* nest : {"[ns.l]", "{'k': ns.l}", "dict(k=ns.l)"}) {
    EXPECT_THROW(
        render(std::string(
                   "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ") +
               nest + " %}{% endfor %}"),
        Error)
        << nest;
  }
  EXPECT_THROW(render("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set m = [] %}"
                      "{{ m.append(ns.l) or '' }}{% set ns.l = m %}{% endfor %}"),
               Error);
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_THROW(render("{{ x }}", {{"x", deep}}), Error);
  EXPECT_THROW(render("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l "
                      "+ ns.l %}{% endfor %}",
                      {}, limits),
               Error);
}

// Every cut of a real template (a truncated or garbled file) parses and renders or fails with
// an Error; none may crash.
TEST(JinjaTemplate, CutTemplatesFailCleanly) {
  const std::string source = read_file(testing::source_dir() +
                                       "/models/reference-chat/qwen3-thinking/chat_template.jinja");
  const nlohmann::ordered_json context = {
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"}, {"content", "<think>a</think>b"}}}},
      {"add_generation_prompt", true}};
  size_t rendered = 0;
  const size_t stride = testing::kSanitized ? 7 : 1;
  for (size_t length = 0; length <= source.size(); length += stride) {
    for (const std::string& cut : {source.substr(0, length), source.substr(length)}) {
      try {
        Template(cut).render(context);
        ++rendered;
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(rendered, 0u);
}

}  // namespace
}  // namespace oscar::jinja
