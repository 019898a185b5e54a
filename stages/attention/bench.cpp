// One bench for every attention version (compiled once; each version's executable links it with
// its name, study::kStageVersion): check against the CPU reference on the exact shape, then time,
// then one CSV row.
#include "attention/harness.hpp"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/stage_version.hpp"
#include "harness/vit_config.hpp"

int main(int argc, char** argv) {
  return study::bench_main(study::stage_program("attention").c_str(), [&](study::BenchReport& report) {
    study::CommonOptions o;
    int tokens = 0, heads = 0, head_dim = 0;
    bool force = false;
    study::Cli cli(study::stage_program("attention"),
                   "Multi-head self-attention on the packed QKV buffer: check, time, one CSV row.");
    cli.add_common(o);
    cli.add_int("--tokens", &tokens, "tokens per image (default (image/16)^2 + 1)");
    cli.add_int("--heads", &heads, "attention heads (default the model's)");
    cli.add_int("--head-dim", &head_dim, "features per head (default the model's, 64)");
    cli.add_flag("--force", &force, "time even above the version's work budget");
    cli.add_version_list(study::version_names(attention::versions()));
    cli.parse(argc, argv);

    const auto& model = study::find_model(o.model);
    const int image_tokens = study::tokens_for_image(o.image_size);
    attention::Problem p;
    p.batch = o.batch;
    p.tokens = cli.given("--tokens") ? tokens : image_tokens;
    p.heads = cli.given("--heads") ? heads : model.heads;
    p.head_dim = cli.given("--head-dim") ? head_dim : model.head_dim();
    const auto& version = attention::find_version(study::kStageVersion);

    report.open(o);
    report.row = study::base_row(o, "attention", version.name);
    report.row.set("tokens", p.tokens).set("heads", p.heads).set("head_dim", p.head_dim);
    report.row.set("hidden", static_cast<long long>(p.heads) * p.head_dim).set("host_syncs", 0);
    report.row.set("rows", static_cast<long long>(p.batch) * p.tokens);
    study::require_gpu(o.device);
    if (study::refuse_streams(report, o, "attention")) return 0;  // no row claims unused streams
    const std::string shape_note = "B=" + std::to_string(p.batch) + " T=" + std::to_string(p.tokens) +
                                   " H=" + std::to_string(p.heads) + " D=" + std::to_string(p.head_dim);
    if (auto why = version.supports(p); !why.empty()) {
      report.write("skipped", why);
      return 0;
    }
    if (version.bench_max_work > 0 && attention::flops(p) > version.bench_max_work && !force) {
      char why[160];
      std::snprintf(why, sizeof why, "%s; %.3g flops is above this version's work budget of %.3g "
                    "(minutes per call); --force times it anyway", shape_note.c_str(),
                    attention::flops(p), version.bench_max_work);
      report.write("skipped", why);
      return 0;
    }

    study::require_memory(attention::memory_need(p, o.check), study::stage_program("attention") + " at " + shape_note);
    const auto in = attention::make_inputs(p, o.seed);
    attention::DeviceProblem dev(p, in);
    std::string check_note = "not checked (--no-check)";
    if (o.check) {
      const auto c = attention::run_and_check(version, p, in, dev, o.seed);
      report.row.set("max_abs_err", c.cmp.max_abs).set("rel_l2_err", c.cmp.rel_l2);
      if (!c.cmp.ok) {
        report.write("failed", shape_note + "; reference check failed: " + c.summary());
        return 1;
      }
      check_note = c.gpu_checked ? "checked all " + std::to_string(c.pairs_total) +
                                       " (batch, head) pairs against the GPU reference, " +
                                       std::to_string(c.pairs_checked) + " also against the CPU reference"
                                 : "checked " + std::to_string(c.pairs_checked) + "/" +
                                       std::to_string(c.pairs_total) + " (batch, head) pairs";
    }
    const auto args = dev.args();
    study::measure(report, o, study::stage_program("attention"), [&](cudaStream_t s) { version.launch(p, args, s); },
                   attention::bytes(p), attention::flops(p));
    report.write("ok", shape_note + "; " + check_note + "; cuda events per call");
    return 0;
  });
}
