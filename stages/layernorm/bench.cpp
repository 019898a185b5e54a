// One bench for every LayerNorm version (compiled once; each version's executable links it with
// its name, study::kStageVersion): check against the CPU reference on the exact shape, then time,
// then one CSV row.
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/stage_version.hpp"
#include "harness/vit_config.hpp"
#include "layernorm/harness.hpp"

int main(int argc, char** argv) {
  return study::bench_main(study::stage_program("layernorm").c_str(), [&](study::BenchReport& report) {
    study::CommonOptions o;
    int rows = 0, hidden = 0;
    study::Cli cli(study::stage_program("layernorm"),
                   "LayerNorm over [batch*tokens, hidden] (eps 1e-6): check, time, one CSV row.");
    cli.add_common(o);
    cli.add_int("--rows", &rows, "rows to normalize (default batch * tokens of the image)");
    cli.add_int("--hidden", &hidden, "features per row (default the model's hidden size)");
    cli.add_version_list(study::version_names(layernorm::versions()));
    cli.parse(argc, argv);

    const auto& model = study::find_model(o.model);
    const int tokens = study::tokens_for_image(o.image_size);
    layernorm::Problem p;
    p.rows = study::problem_rows(o, cli.given("--rows"), rows);
    p.hidden = cli.given("--hidden") ? hidden : model.hidden;
    const auto& version = layernorm::find_version(study::kStageVersion);

    report.open(o);
    report.row = study::base_row(o, "layernorm", version.name);
    report.row.set("tokens", tokens).set("hidden", p.hidden).set("host_syncs", 0).set("rows", p.rows);
    study::require_gpu(o.device);
    if (study::refuse_streams(report, o, "layernorm")) return 0;  // no row claims unused streams
    const std::string shape_note = "rows=" + std::to_string(p.rows);
    if (auto why = version.supports(p); !why.empty()) {
      report.write("skipped", why);
      return 0;
    }

    study::require_memory(layernorm::memory_need(p, o.check),
                          study::stage_program("layernorm") + " at " + shape_note +
                              " hidden=" + std::to_string(p.hidden));
    const auto in = layernorm::make_inputs(p, o.seed);
    layernorm::DeviceProblem dev(in);
    std::string check_note = "not checked (--no-check)";
    if (o.check) {
      const auto c = layernorm::run_and_check(version, p, in, dev);
      report.row.set("max_abs_err", c.max_abs).set("rel_l2_err", c.rel_l2);
      if (!c.ok) {
        report.write("failed", shape_note + "; reference check failed: " + c.summary());
        return 1;
      }
      check_note = "checked";
    }
    const auto args = dev.args();
    study::measure(report, o, study::stage_program("layernorm"), [&](cudaStream_t s) { version.launch(p, args, s); },
                   layernorm::bytes(p), layernorm::flops(p));
    report.write("ok", shape_note + "; " + check_note + "; cuda events per call");
    return 0;
  });
}
