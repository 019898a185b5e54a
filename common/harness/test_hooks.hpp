// Test hooks: planted bugs for the mutation suite (tests/mutants.py) and counters a test reads,
// compiled only into a build configured with -Dtest_hooks=true (STUDY_TEST_HOOKS). In every
// other build kTestHooks is false and planted() a constant false, so no kernel, bench or timed
// path carries any of it (and the PTX fingerprints of tests/frozen_rungs.py are unchanged).
//
// A planted bug is named by STUDY_PLANT=<name> in the environment; test_hooks.cpp lists the
// names with what each plants, and refuses an unknown one, so a typo in the mutation table
// cannot pass for a caught mutant.
#pragma once
#include <string>
#include <vector>

namespace study {

#ifdef STUDY_TEST_HOOKS
constexpr bool kTestHooks = true;
// Whether bug `name` is planted in this run. `name` must be one of plants().
bool planted(const char* name);
#else
constexpr bool kTestHooks = false;
constexpr bool planted(const char*) { return false; }
#endif

struct Plant {
  const char* name;
  const char* what;
};
// Every bug a test-hook build can plant (empty in other builds).
const std::vector<Plant>& plants();

}  // namespace study
