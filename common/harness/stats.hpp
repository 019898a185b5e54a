// Summary statistics of repeated timings.
#pragma once
#include <vector>

namespace study {

struct Stats {
  double mean = 0, std = 0, median = 0, min = 0, max = 0;
  int count = 0;
};

// Sample standard deviation (n-1); a single sample has std 0. Throws on an empty input.
Stats summarize(std::vector<double> samples);

}  // namespace study
