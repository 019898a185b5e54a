#include "encoder/composition.hpp"
#include <iterator>
#include <sstream>
#include <stdexcept>
#include "harness/check.hpp"

namespace encoder {

namespace {

#define STUDY_NOTHING(...)
constexpr bool kRunner_forward = false, kRunner_runner = true;

struct Value {
  const char* written;
  const char* what;
};
#define STUDY_VALUE(E, written, what) {written, what},
#define STUDY_VALUE_TABLE(member, key, Enum, ...) const Value k##Enum[] = {STUDY_VALUES_##Enum(STUDY_VALUE)};
STUDY_COMPOSITION_FIELDS(STUDY_NOTHING, STUDY_VALUE_TABLE, STUDY_VALUE_TABLE, STUDY_NOTHING, STUDY_NOTHING)
#undef STUDY_VALUE_TABLE
#undef STUDY_VALUE

enum class Kind { Version, Choice, Set, Count, Switch };
const char* const kKindNames[] = {"version", "choice", "set", "count", "switch"};

// One field of composition.def: how it is written, what it is, its values (choices and sets).
struct FieldDecl {
  FieldId id;
  Kind kind;
  const char* key;
  bool runner;
  const char* what;
  const Value* values;
  int n_values;
  unsigned set_default;  // a set's default members (bits); a choice's default is its first value
};
#define STUDY_DECL_VERSION(member, key, scope, what) \
  {FieldId::member, Kind::Version, key, kRunner_##scope, what, nullptr, 0, 0},
#define STUDY_DECL_CHOICE(member, key, Enum, scope, what) \
  {FieldId::member, Kind::Choice, key, kRunner_##scope, what, k##Enum, int(std::size(k##Enum)), 0},
#define STUDY_DECL_SET(member, key, Enum, Default, scope, what)                                  \
  {FieldId::member, Kind::Set, key, kRunner_##scope, what, k##Enum, int(std::size(k##Enum)), \
   Set<Enum>{Enum::Default}.bits},
#define STUDY_DECL_COUNT(member, key, scope, what) \
  {FieldId::member, Kind::Count, key, kRunner_##scope, what, nullptr, 0, 0},
#define STUDY_DECL_SWITCH(member, key, scope, what) \
  {FieldId::member, Kind::Switch, key, kRunner_##scope, what, nullptr, 0, 0},
const FieldDecl kFields[] = {STUDY_COMPOSITION_FIELDS(STUDY_DECL_VERSION, STUDY_DECL_CHOICE, STUDY_DECL_SET,
                                                      STUDY_DECL_COUNT, STUDY_DECL_SWITCH)};
#undef STUDY_DECL_VERSION
#undef STUDY_DECL_CHOICE
#undef STUDY_DECL_SET
#undef STUDY_DECL_COUNT
#undef STUDY_DECL_SWITCH

const FieldDecl& decl(FieldId f) { return kFields[static_cast<unsigned>(f)]; }

[[noreturn]] void refuse(const std::string& what) {
  throw study::StudyError(study::ErrorKind::Usage, "composition: " + what);
}

std::string known_values(const FieldDecl& f) {
  std::string known;
  for (int i = 0; i < f.n_values; ++i) known += (i ? ", " : "") + std::string(f.values[i].written);
  return known;
}

int lookup(const FieldDecl& f, const std::string& value) {
  for (int i = 0; i < f.n_values; ++i)
    if (value == f.values[i].written) return i;
  refuse("unknown " + std::string(f.key) + " '" + value + "' (known: " + known_values(f) + ")");
}

unsigned lookup_set(const FieldDecl& f, const std::string& value) {
  unsigned bits = 0;
  std::istringstream in(value);
  for (std::string member; std::getline(in, member, '+');) bits |= 1u << lookup(f, member);
  if (!bits || value.back() == '+')
    refuse(std::string(f.key) + " takes one or more of " + known_values(f) + " joined by '+', not '" + value + "'");
  return bits;
}

std::string set_name(const FieldDecl& f, unsigned bits) {
  std::string s;
  for (int i = 0; i < f.n_values; ++i)
    if (bits >> i & 1u) s += (s.empty() ? "" : "+") + std::string(f.values[i].written);
  return s;
}

bool on_off(const std::string& key, const std::string& value) {
  if (value.empty() || value == "on") return true;
  if (value == "off") return false;
  refuse(key + " takes on or off, not '" + value + "'");
}

int positive(const std::string& key, const std::string& value) {
  try {
    std::size_t used = 0;
    const int n = std::stoi(value, &used);
    if (used == value.size() && n >= 1) return n;
  } catch (const std::logic_error&) {
  }
  refuse(key + " takes a positive integer, not '" + value + "'");
}

std::string known_keys() {
  std::string known;
  for (const auto& f : kFields)
    known += (known.empty() ? "" : " ") + std::string(f.key) + (f.kind == Kind::Switch ? "" : "=");
  return known;
}

// A field's default as written (empty for a version: none named).
std::string default_text(const FieldDecl& f) {
  switch (f.kind) {
    case Kind::Choice: return f.values[0].written;
    case Kind::Set: return set_name(f, f.set_default);
    case Kind::Count: return "1";  // every count member starts at 1 (composition.hpp)
    case Kind::Switch: return "off";
    case Kind::Version: break;
  }
  return {};
}

}  // namespace

#define STUDY_NAME_DEF(member, key, Enum, ...) \
  const char* name(Enum e) { return k##Enum[static_cast<unsigned>(e)].written; }
#define STUDY_SET_NAME_DEF(member, key, Enum, ...)                                     \
  const char* name(Enum e) { return k##Enum[static_cast<unsigned>(e)].written; } \
  std::string name(Set<Enum> s) { return set_name(decl(FieldId::member), s.bits); }
STUDY_COMPOSITION_FIELDS(STUDY_NOTHING, STUDY_NAME_DEF, STUDY_SET_NAME_DEF, STUDY_NOTHING, STUDY_NOTHING)
#undef STUDY_NAME_DEF
#undef STUDY_SET_NAME_DEF

std::string describe(FieldId f) {
  const FieldDecl& d = decl(f);
  return std::string(d.key) + (d.kind == Kind::Switch ? "" : "=") + " (" + d.what + ")";
}

unsigned forward_fields() {
  unsigned bits = 0;
  for (const auto& f : kFields) bits |= f.runner ? 0u : field_bit(f.id);
  return bits;
}

unsigned fields_set(const Composition& c) {
  const Composition d;
  unsigned bits = 0;
#define STUDY_SET_IF(member, ...) bits |= c.member != d.member ? field_bit(FieldId::member) : 0u;
  STUDY_COMPOSITION_FIELDS(STUDY_SET_IF, STUDY_SET_IF, STUDY_SET_IF, STUDY_SET_IF, STUDY_SET_IF)
#undef STUDY_SET_IF
  return bits;
}

std::string Composition::to_string() const {
  const Composition d;
  std::string s;
  auto add = [&s](const std::string& field) { s += (s.empty() ? "" : " ") + field; };
  // A version the forward reads is always written (pe= ln=); one of the runner's where it is named.
#define STUDY_OUT_VERSION(member, key, scope, what) \
  if (!kRunner_##scope || !member.empty()) add(std::string(key "=") + member);
#define STUDY_OUT_CHOICE(member, key, ...) \
  if (member != d.member) add(std::string(key "=") + name(member));
#define STUDY_OUT_COUNT(member, key, ...) \
  if (member != d.member) add(std::string(key "=") + std::to_string(member));
#define STUDY_OUT_SWITCH(member, key, ...) \
  if (member) add(key);
  STUDY_COMPOSITION_FIELDS(STUDY_OUT_VERSION, STUDY_OUT_CHOICE, STUDY_OUT_CHOICE, STUDY_OUT_COUNT, STUDY_OUT_SWITCH)
#undef STUDY_OUT_VERSION
#undef STUDY_OUT_CHOICE
#undef STUDY_OUT_COUNT
#undef STUDY_OUT_SWITCH
  return s;
}

Composition apply(Composition c, const std::string& text) {
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    const auto eq = field.find('=');
    const std::string key = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
    // A version of the runner's may be `none`: the blocks compute that part themselves (a step's
    // delta on a parent that named a version).
    auto version = [&](std::string& v, bool may_be_none) {
      if (value.empty()) refuse(key + " needs a version name" + (may_be_none ? " or none" : ""));
      v = may_be_none && value == "none" ? "" : value;
    };
#define STUDY_IN_VERSION(member, k, scope, what) \
  if (key == k) {                                \
    version(c.member, kRunner_##scope);          \
    continue;                                    \
  }
#define STUDY_IN_CHOICE(member, k, Enum, ...)                                      \
  if (key == k) {                                                                  \
    c.member = static_cast<Enum>(lookup(decl(FieldId::member), value));            \
    continue;                                                                      \
  }
#define STUDY_IN_SET(member, k, ...)                                               \
  if (key == k) {                                                                  \
    c.member.bits = lookup_set(decl(FieldId::member), value);                      \
    continue;                                                                      \
  }
#define STUDY_IN_COUNT(member, k, ...) \
  if (key == k) {                      \
    c.member = positive(key, value);   \
    continue;                          \
  }
#define STUDY_IN_SWITCH(member, k, ...) \
  if (key == k) {                       \
    c.member = on_off(key, value);      \
    continue;                           \
  }
    STUDY_COMPOSITION_FIELDS(STUDY_IN_VERSION, STUDY_IN_CHOICE, STUDY_IN_SET, STUDY_IN_COUNT, STUDY_IN_SWITCH)
#undef STUDY_IN_VERSION
#undef STUDY_IN_CHOICE
#undef STUDY_IN_SET
#undef STUDY_IN_COUNT
#undef STUDY_IN_SWITCH
    refuse("unknown field '" + field + "' (known: " + known_keys() + ")");
  }
  return c;
}

std::string fields_help() {
  std::string out;
  for (const auto& f : kFields) {
    std::string form = f.key;
    if (f.kind == Kind::Version) form += f.runner ? "=NAME|none" : "=NAME";
    if (f.kind == Kind::Count) form += "=N";
    if (f.kind == Kind::Choice || f.kind == Kind::Set) {
      const char* between = f.kind == Kind::Set ? "+" : "|";
      form += "=";
      for (int i = 0; i < f.n_values; ++i) form += (i ? between : "") + std::string(f.values[i].written);
    }
    out += "  " + form + "\n      " + f.what;
    if (f.kind == Kind::Set) out += " (any of them joined by '+')";
    if (f.kind == Kind::Switch) out += " (a switch: " + std::string(f.key) + " or " + f.key + "=on|off)";
    if (f.kind != Kind::Version) out += " (default " + default_text(f) + ")";
    out += "\n";
    for (int i = 0; i < f.n_values; ++i)
      out += "      " + std::string(f.values[i].written) + ": " + f.values[i].what + "\n";
  }
  return out;
}

std::string fields_tsv() {
  std::string out =
      "# Generated from stages/encoder/composition.def (encoder_e1_library --list-fields); a CPU test keeps it "
      "current.\nkey\tkind\tscope\tdefault\tvalue\tfield_meaning\tvalue_meaning\n";
  for (const auto& f : kFields) {
    const std::string head = std::string(f.key) + '\t' + kKindNames[static_cast<int>(f.kind)] + '\t' +
                             (f.runner ? "runner" : "forward") + '\t' + default_text(f) + '\t';
    if (!f.n_values) out += head + '\t' + f.what + "\t\n";
    for (int i = 0; i < f.n_values; ++i)
      out += head + f.values[i].written + '\t' + f.what + '\t' + f.values[i].what + '\n';
  }
  return out;
}

}  // namespace encoder
