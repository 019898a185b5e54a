// The encoder's steps: each one a parent plus one idea, kept as data. A step's composition is
// its parent's with the step's delta applied (both in composition.hpp's text form), so a new
// step is one row of the table in steps.cpp plus, where its idea needs new behaviour, a block
// runner (runners.hpp). The table is also committed as steps.tsv (the analysis and the sweep
// specs read it without a build); a CPU test keeps that file current.
#pragma once
#include <string>
#include <vector>
#include "encoder/composition.hpp"

namespace encoder {

struct Step {
  const char* name;
  const char* parent;  // "" for the root
  const char* what;    // one line: what the step changes
  const char* delta;   // the fields it changes, in the text form
};

// Every step, parents before children.
const std::vector<Step>& steps();

// A name the table resolves to a step: the fastest steps of the committed measurements.
struct Alias {
  const char* name;
  const char* step;
  const char* measured;  // the sitting (a folder under experiments/results/) that shows it fastest
};
const std::vector<Alias>& aliases();

// The composition of a step or an alias; throws StudyError(Usage) naming the known ones.
Composition find_step(const std::string& name);
// An alias's step, or the name itself.
std::string resolve_alias(const std::string& name);

// The table as tab-separated text, what steps.tsv holds: a comment, a header, one line per step
// (name, "step", parent, delta, composition, "", what), then one per alias (name, "alias", its
// step, "", the step's composition, the run folder, what).
std::string steps_tsv();

}  // namespace encoder
