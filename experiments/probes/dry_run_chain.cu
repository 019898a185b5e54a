// The tile schedule's chain without its math: what a tile-scheduled forward's dependencies and
// hand-offs cost before any tile of math is written (the batch-1 waterfall's "gaps and hand-offs"
// bar, measured for a tiling before its kernel exists; stages/encoder/NOTES.md). The schedule's
// dry run (stages/encoder/tile_dry_run.hpp) at the forward's launch shape: persistent CTAs take
// tickets, wait on the counters, check and count the tiles each task reads and writes, and signal.
// Checked first: one run leaves every counter at a complete forward's count with no fault. One
// CSV row, family `probes`, version `dry_run_chain`; the note gives the tiling, the tasks and the
// time a block's stage takes on the chain (the run over blocks x 5 dependent stages).
#include <string>
#include "encoder/tile_dry_run.hpp"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/vit_config.hpp"

namespace {

constexpr int kStagesPerBlock = 5;  // QKV, attention, projection, fc1, fc2 (LayerNorms folded)
constexpr int kFc2Split = 4;        // the 64 x 64 forward's (tiled_task.cuh, kSplit)

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("dry_run_chain", [&](study::BenchReport& report) {
    study::CommonOptions o;
    std::string tiling = "read_once";
    int ctas_per_sm = 2, threads = 256, layers = 0;
    study::Cli cli("dry_run_chain",
                   "Times the tile schedule's dry run (its counters, tickets and tile checks, no math) at the "
                   "forward's launch shape: one CSV row.");
    cli.add_common(o);
    cli.add_string("--tiling", &tiling, "read_once (256-row GEMM tasks, K split for 132+ CTAs) or tiles64 (64 x 64 "
                                        "tasks, fc2 in 4 slices)");
    cli.add_int("--ctas-per-sm", &ctas_per_sm, "resident CTAs an SM (default 2, the forward's)");
    cli.add_int("--threads", &threads, "threads a CTA (default 256, the forward's)", 32);
    cli.add_int("--layers", &layers, "blocks (default: the model's)", 0);
    cli.parse(argc, argv);
    study::validate_common(o);
    if (tiling != "read_once" && tiling != "tiles64")
      throw study::StudyError(study::ErrorKind::Usage, "--tiling must be read_once or tiles64, got '" + tiling + "'");
    const study::ModelConfig m = study::find_model(o.model);
    const int blocks = layers > 0 ? layers : m.layers;
    const int tokens = (o.image_size / 16) * (o.image_size / 16) + 1;
    if (!study::open_probe(report, o, "dry_run_chain")) return 0;
    report.row.set("model", o.model).set("batch", o.batch).set("image_size", o.image_size);
    const int sms = study::sm_count(o.device);
    const encoder::tiles::Shape shape =
        tiling == "read_once" ? encoder::tiles::read_once_shape(m.hidden, blocks, tokens, o.batch, sms)
                              : encoder::tiles::vit_shape(m.hidden, blocks, tokens, o.batch, kFc2Split);
    if (const auto why = encoder::tiles::refuses(shape); !why.empty())
      throw study::StudyError(study::ErrorKind::Usage, "the schedule cannot describe this shape: " + why);
    const encoder::tiles::Schedule sched = encoder::tiles::build(shape);
    encoder::tiles::DryRunLaunch launch;
    launch.ctas = ctas_per_sm * sms;
    launch.threads = threads;
    std::unique_ptr<encoder::tiles::DryRunner> runner;
    try {
      runner = std::make_unique<encoder::tiles::DryRunner>(sched, launch);
    } catch (const std::invalid_argument& e) {
      throw study::StudyError(study::ErrorKind::Usage, e.what());
    }
    if (o.check) {
      runner->launch(nullptr);
      const encoder::tiles::DryRun r = runner->result();
      if (r.faults || r.counters != sched.final_counts) {
        report.write("failed", std::to_string(r.faults) + " faults (first at ticket " + std::to_string(r.first_fault) +
                                   "); the counters " + (r.counters == sched.final_counts ? "" : "not ") +
                                   "a complete forward's");
        return 1;
      }
    }
    study::measure(report, o, "dry_run_chain", [&](cudaStream_t s) { runner->launch(s); }, 0, 0);
    const double median = std::stod(report.row.get("median_us"));
    report.row.set("gbps", "").set("tflops", "");
    const std::string splits = tiling == "read_once"
                                   ? "; K slices QKV " + std::to_string(shape.qkv_split) + ", projection " +
                                         std::to_string(shape.proj_split) + ", fc1 " + std::to_string(shape.fc1_split) +
                                         ", fc2 " + std::to_string(shape.fc2_split)
                                   : "";
    report.write("ok", tiling + " tiling, " + std::to_string(sched.tasks.size()) + " tasks" + splits + "; " +
                           std::to_string(launch.ctas) + " CTAs x " + std::to_string(threads) + " threads; a stage " +
                           std::to_string(median / (blocks * kStagesPerBlock)) + " us (" + std::to_string(blocks) +
                           " blocks x " + std::to_string(kStagesPerBlock) + " stages)" +
                           (o.check ? "; counters checked after one run" : ""));
    return 0;
  });
}
