// One bench for every MLP version (compiled once; each version's executable links it with its
// name, study::kStageVersion): check against the CPU reference on the exact shape, then time,
// then one CSV row.
#include "gemm/cutlass_gemm.hpp"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/stage_version.hpp"
#include "harness/vit_config.hpp"
#include "mlp/harness.hpp"

int main(int argc, char** argv) {
  return study::bench_main(study::stage_program("mlp").c_str(), [&](study::BenchReport& report) {
    study::CommonOptions o;
    int rows = 0, hidden = 0, workspace_mib = 4, autotune = 0;
    bool heuristic_every_call = false, search_all = false;
    study::Cli cli(study::stage_program("mlp"),
                   "ViT MLP y = x + fc2(GELU(fc1(x))) over [batch*tokens, hidden], mlp 4x hidden: "
                   "check, time, one CSV row.");
    cli.add_common(o);
    cli.add_int("--rows", &rows, "rows (default batch * tokens of the image)");
    cli.add_int("--hidden", &hidden, "features per row (default the model's hidden size); mlp = 4x");
    cli.add_int("--workspace-mib", &workspace_mib, "cuBLASLt workspace in MiB (default 4)", 0);
    cli.add_flag("--heuristic-every-call", &heuristic_every_call,
                 "query the cuBLASLt heuristic on every GEMM instead of once per shape");
    cli.add_int("--autotune", &autotune, "time the heuristic's top N cuBLASLt algorithms per shape "
                "once and keep the fastest (default 0: the heuristic's first)", 0);
    cli.add_flag("--search-all", &search_all, "time every algorithm cuBLASLt will run for each shape "
                 "(every algorithm id and configuration it accepts) and keep the fastest");
    cli.add_version_list(study::version_names(mlp::versions()));
    cli.parse(argc, argv);

    const auto& model = study::find_model(o.model);
    const int tokens = study::tokens_for_image(o.image_size);
    if (autotune > 64)
      throw study::StudyError(study::ErrorKind::Usage, "--autotune must be <= 64, got " + std::to_string(autotune));
    if (workspace_mib > 4096)
      throw study::StudyError(study::ErrorKind::Usage, "--workspace-mib must be <= 4096, got " +
                                                           std::to_string(workspace_mib));
    mlp::Problem p;
    p.rows = study::problem_rows(o, cli.given("--rows"), rows);
    p.hidden = cli.given("--hidden") ? hidden : model.hidden;
    p.mlp_hidden = 4 * p.hidden;
    const auto& version = mlp::find_version(study::kStageVersion);

    report.open(o);
    report.row = study::base_row(o, "mlp", version.name);
    report.row.set("tokens", tokens).set("hidden", p.hidden).set("host_syncs", 0).set("rows", p.rows);
    report.row.set("precision", version.precision());
    study::require_gpu(o.device);
    const std::string setup = "rows=" + std::to_string(p.rows) + " mlp_hidden=" +
                              std::to_string(p.mlp_hidden) + "; workspace " +
                              std::to_string(workspace_mib) + " MiB; heuristic " +
                              (heuristic_every_call ? "every call" : "cached") +
                              (autotune > 1 ? "; autotuned over " + std::to_string(autotune) + " candidates" : "") +
                              (search_all ? "; searched every cuBLASLt algorithm" : "");
    if (o.streams != 1) {  // as the PyTorch anchors: never a row that claims streams it did not use
      report.write("skipped", "the MLP bench runs on one stream (--streams 1 only)");
      return 0;
    }
    if (auto why = version.supports(p); !why.empty()) {
      report.write("skipped", why);
      return 0;
    }

    const std::size_t workspace_bytes = static_cast<std::size_t>(workspace_mib) << 20;
    study::require_memory(mlp::memory_need(p, o.check, workspace_bytes),
                          study::stage_program("mlp") + " at rows=" + std::to_string(p.rows) + " hidden=" +
                              std::to_string(p.hidden));
    const auto in = mlp::make_inputs(p, o.seed);
    mlp::DeviceProblem dev(p, in);
    study::GemmConfig gc;
    gc.workspace_bytes = workspace_bytes;
    gc.heuristic_every_call = heuristic_every_call;
    gc.autotune_candidates = autotune;
    gc.search_all = search_all;
    study::Gemm gemm(gc);
    dev.prepare_fp8(version, p, gemm);  // an FP8 version's weights and scales, outside the timing

    std::string check_note = "not checked (--no-check)";
    if (o.check) {
      const auto c = mlp::run_and_check(version, p, in, dev, gemm);
      report.row.set("max_abs_err", c.cmp.max_abs).set("rel_l2_err", c.cmp.rel_l2);
      if (!c.cmp.ok) {
        report.write("failed", setup + "; reference check failed: " + c.cmp.summary() + "; " + c.what);
        return 1;
      }
      check_note = c.what;
    }
    const auto args = dev.args(gemm);
    study::measure(report, o, study::stage_program("mlp"), [&](cudaStream_t s) { version.launch(p, args, s); },
                   mlp::bytes(p), mlp::flops(p));
    std::string chosen;  // which kernels the tuning settled on, the point of a tuned row
    if (autotune > 1 || search_all)
      for (const auto& line : gemm.choices()) chosen += "; " + line;
    // What the CUTLASS GEMM layer ran, if this version used it (empty otherwise).
    for (const auto& line : study::cutlass_gemm::choices()) chosen += "; cutlass " + line;
    if (dev.fp8) {
      chosen += std::string("; ") + study::fp8::scaling_name(version.scaling) + " weight scales, x scale " +
                std::to_string(dev.fp8->x_scale.host_scale) + ", h scale " + std::to_string(dev.fp8->h_scale.host_scale);
      for (const auto& line : dev.fp8->gemm.choices()) chosen += "; " + line;
    }
    report.write("ok", setup + "; " + check_note + "; cuda events per call" + chosen);
    return 0;
  });
}
