// What one whole-ViT forward is made of: a version of each family and the techniques of the
// whole forward. Every encoder step (steps.hpp) is one Composition; a custom mix is another.
// Its fields are declared once, in composition.def.
//
// One text form serves the step table, the bench's CSV rows and --help, and the analysis
// (studylib/steps.py reads it back, with composition.tsv for the fields): space-separated fields
// in composition.def's order, pe= and ln= always, attn= and mlp= where the blocks run a family
// version of them, every other field only where it differs from its default:
//   pe=v10_round_tiles ln=v5_unrolled attn=v9_softmax_overlap mlp=fastest_epilogue
//   gemms=cutlass+cublaslt residual=epilogue graph pdl l2_prefetch
// A switch is written as its bare name when on (`graph`), or as `graph=on|off`; a set as its
// members joined by '+' in the list's order, in any order when read.
#pragma once
#include <initializer_list>
#include <string>
#include "encoder/composition.def"

namespace encoder {

#define STUDY_ENUMERATOR(E, written, what) E,
#define STUDY_CHOICE_ENUM(member, key, Enum, ...) \
  enum class Enum : unsigned char { STUDY_VALUES_##Enum(STUDY_ENUMERATOR) };
#define STUDY_NOTHING(...)
STUDY_COMPOSITION_FIELDS(STUDY_NOTHING, STUDY_CHOICE_ENUM, STUDY_CHOICE_ENUM, STUDY_NOTHING, STUDY_NOTHING)
#undef STUDY_CHOICE_ENUM

// The members of a set field (gemms=): one bit per value of E.
template <class E>
struct Set {
  unsigned bits = 0;
  constexpr Set() = default;
  constexpr Set(std::initializer_list<E> members) {
    for (E e : members) bits |= 1u << static_cast<unsigned>(e);
  }
  constexpr bool has(E e) const { return bits >> static_cast<unsigned>(e) & 1u; }
  constexpr bool operator==(Set o) const { return bits == o.bits; }
  constexpr bool operator!=(Set o) const { return bits != o.bits; }
};

// One id per field, in the list's order; field_bit(id) in Runner::reads and fields_set().
enum class FieldId : unsigned char {
#define STUDY_FIELD_ID(member, ...) member,
  STUDY_COMPOSITION_FIELDS(STUDY_FIELD_ID, STUDY_FIELD_ID, STUDY_FIELD_ID, STUDY_FIELD_ID, STUDY_FIELD_ID)
#undef STUDY_FIELD_ID
};
constexpr unsigned field_bit(FieldId f) { return 1u << static_cast<unsigned>(f); }
constexpr unsigned field_bits(std::initializer_list<FieldId> fields) {
  unsigned bits = 0;
  for (FieldId f : fields) bits |= field_bit(f);
  return bits;
}

struct Composition {
  // Versions by name: empty where the runner computes that part itself (blocks=persistent, tiled).
#define STUDY_VERSION_MEMBER(member, ...) std::string member;
#define STUDY_CHOICE_MEMBER(member, key, Enum, ...) Enum member{};
#define STUDY_SET_MEMBER(member, key, Enum, Default, ...) Set<Enum> member{Enum::Default};
#define STUDY_COUNT_MEMBER(member, ...) int member = 1;
#define STUDY_SWITCH_MEMBER(member, ...) bool member = false;
  STUDY_COMPOSITION_FIELDS(STUDY_VERSION_MEMBER, STUDY_CHOICE_MEMBER, STUDY_SET_MEMBER, STUDY_COUNT_MEMBER,
                           STUDY_SWITCH_MEMBER)
#undef STUDY_VERSION_MEMBER
#undef STUDY_CHOICE_MEMBER
#undef STUDY_SET_MEMBER
#undef STUDY_COUNT_MEMBER
#undef STUDY_SWITCH_MEMBER

  bool fp8() const { return blocks == Blocks::Fp8; }
  const char* precision() const { return fp8() ? "fp8_e4m3" : "fp16"; }
  bool tiled() const { return blocks == Blocks::Tiled; }
  bool per_layer_buffers() const { return buffers == Buffers::PerLayer; }
  bool residual_epilogue() const { return residual == Residual::Epilogue; }
  bool operator==(const Composition& o) const { return to_string() == o.to_string(); }
  bool operator!=(const Composition& o) const { return !(*this == o); }
  std::string to_string() const;
};

// The fields (field_bit) that c sets away from their defaults; a version: named at all.
unsigned fields_set(const Composition& c);
// How a field is written and what it is: "attn_e4m3 (an E4M3 attention output)".
std::string describe(FieldId f);
// The fields read by the forward whatever its blocks (scope `forward` in composition.def).
unsigned forward_fields();

// The fields of `text` applied on top of `base` (a step's delta on its parent's composition; a
// whole composition on Composition{}). Throws StudyError(Usage) naming an unknown field or value.
Composition apply(Composition base, const std::string& text);
inline Composition parse(const std::string& text) { return apply(Composition{}, text); }

// The written name of a choice's value ("tiled", "row_stats") or a set's members joined by '+'.
#define STUDY_NAME_DECL(member, key, Enum, ...) const char* name(Enum e);
#define STUDY_SET_NAME_DECL(member, key, Enum, ...) \
  const char* name(Enum e);                         \
  std::string name(Set<Enum> s);
STUDY_COMPOSITION_FIELDS(STUDY_NOTHING, STUDY_NAME_DECL, STUDY_SET_NAME_DECL, STUDY_NOTHING, STUDY_NOTHING)
#undef STUDY_NAME_DECL
#undef STUDY_SET_NAME_DECL
#undef STUDY_ENUMERATOR
#undef STUDY_NOTHING

// --compose's help: every field, its values and what they mean, one per line.
std::string fields_help();
// composition.tsv: one line per field (VERSION, COUNT, SWITCH) or value (CHOICE, SET) with its
// kind, key, default, scope and meaning, in the list's order.
std::string fields_tsv();

}  // namespace encoder
