// What every family's bench main shares: the row's identity, timing columns, and turning
// an error into a `failed` (or, without a GPU, `skipped`) row plus a one-line message.
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <memory>
#include <string>
#include "harness/cli.hpp"
#include "harness/csv.hpp"
#include "harness/stats.hpp"
#include "harness/timing.hpp"

namespace study {

struct BenchReport {
  std::unique_ptr<CsvWriter> writer;
  Row row;  // identity columns set by the family before any GPU work
  bool written = false;
  void open(const CommonOptions& o) { writer = std::make_unique<CsvWriter>(o.csv, o.device); }
  void write(const std::string& status, const std::string& note);
};

// Identity columns common to all families.
Row base_row(const CommonOptions& o, const std::string& family, const std::string& version);

// mean/std/median/min/max (us) and achieved GB/s, TFLOP/s from the median.
void set_timing(Row& row, const Stats& s, double bytes, double flops);

// The timed region's settings from the shared options (warm-ups, repeats, L2 flush), labelled.
TimingOptions timing_options(const CommonOptions& o, const std::string& label);

// The rows of a [rows, features] problem: `rows` when --rows was given, else batch x the image
// size's tokens; StudyError(Usage) when that overflows the row count.
int problem_rows(const CommonOptions& o, bool rows_given, int rows);

// With --energy S: the energy of one call (harness/energy.hpp) over S seconds of back-to-back
// calls into the energy columns, after the timing whose median sizes the loop; `images` is what
// one call computes. Without it, nothing.
void set_energy(Row& row, const CommonOptions& o, const std::function<void(cudaStream_t)>& run, double median_us,
                int images, cudaStream_t stream = nullptr);

// Counts the kernels one call launches (graph capture), then times it as the options say
// (warm-ups, CUDA events per call, optional L2 flush), and fills the row's launches and timing
// columns, and with --energy the energy columns (one call computing o.batch images).
void measure(BenchReport& report, const CommonOptions& o, const std::string& label,
             const std::function<void(cudaStream_t)>& run, double bytes, double flops);

// Times a version that cannot be captured into a CUDA graph (it synchronizes the host, or
// launches too many kernels to capture): CUDA events around each whole host-driven call, the
// launch and host-sync counts given analytically. Fills the same columns as measure() and
// returns the note part that says how the row was timed.
std::string measure_uncaptured(BenchReport& report, const CommonOptions& o, const std::string& label,
                               const std::function<void(cudaStream_t)>& run, double bytes, double flops,
                               double launches, double host_syncs);

// Fills routine_us (median host-to-host time) and its h2d_us / preprocess_us / d2h_us split
// (medians); preprocess_us stays empty when the routine has no preprocessing phase.
void set_routine(Row& row, const RoutineTimes& t, bool has_preprocess);

// `--streams sm`: after require_gpu, sets o.streams to the device's SM count (and the row's
// streams column); a number given on the command line is kept. Returns the note part that
// says how the count was chosen (empty for a plain number).
std::string resolve_streams(CommonOptions& o, Row& row);

// For benches whose versions run on one stream: unless --streams is 1, writes a `skipped` row
// saying so and returns true, so that no row claims streams it did not use.
bool refuse_streams(BenchReport& report, const CommonOptions& o, const std::string& bench);

// A probe's row (experiments/probes/): the report opened, family `probes`, version `name`, the
// model columns blank (a probe times no model), a GPU required and one stream. Returns false when
// it wrote a `skipped` row instead (refuse_streams).
bool open_probe(BenchReport& report, const CommonOptions& o, const std::string& name);

// Runs body; errors become one stderr line and an exit code as in run_main (2 for usage and
// no GPU, 3 for out of memory), and, once the report is open, a row: `skipped` with the
// message for no GPU and out of memory (require_memory's refusal, or an allocation that
// failed), else `failed` with the message.
int bench_main(const char* program, const std::function<int(BenchReport&)>& body);

}  // namespace study
