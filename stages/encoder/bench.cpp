// One bench for every encoder step (compiled once; each step's executable links it with its name,
// study::kStageVersion; steps.hpp): the whole ViT forward, its logits checked against the CPU
// reference, then timed; one CSV row.
// --compose (or a per-family flag) turns the step into a custom mix, whose row names every choice.
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include "encoder/harness.hpp"
#include "gemm/cutlass_gemm.hpp"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"
#include "harness/random.hpp"
#include "harness/stage_version.hpp"
#include "harness/timing.hpp"
#include "safetensors.hpp"

namespace {

using study::ErrorKind;
using study::StudyError;

// Beside the executable, so every bench of one build shares the reference logits it computed.
std::string default_cache_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string exe(buf, static_cast<std::size_t>(n));
  return exe.substr(0, exe.find_last_of('/')) + "/reference_cache";
}

struct Options {
  study::CommonOptions common;
  std::string pe, ln, attn, mlp, compose, weights, images, calibration_images, logits_out, breakdown_csv,
      task_times_csv, cache_dir = default_cache_dir();
  int classes = 1000, layers = 0;
  bool list_steps = false, list_fields = false, streams_given = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  study::Cli cli(study::stage_program("encoder"),
                 std::string("Whole ViT forward (patch embedding, blocks, head): check the logits, time, one CSV "
                             "row.\nStep ") +
                     study::kStageVersion + ": " + encoder::find_step(study::kStageVersion).to_string());
  cli.add_common(o.common);
  std::vector<std::string> names;
  for (const auto& s : encoder::steps()) names.push_back(s.name);
  cli.add_version_list(names);
  cli.add_flag("--list-steps", &o.list_steps, "print the step table (what stages/encoder/steps.tsv holds) and exit");
  cli.add_flag("--list-fields", &o.list_fields,
               "print the composition's fields (what stages/encoder/composition.tsv holds) and exit");
  cli.add_string("--compose", &o.compose,
                 "fields applied on top of the step, a custom mix (e.g. \"mlp=half_gelu_epilogue l2_prefetch\"); "
                 "the fields:\n" + encoder::fields_help());
  cli.add_string("--patch-embed", &o.pe, "patch-embedding version (a custom mix; default the step's)");
  cli.add_string("--layernorm", &o.ln, "LayerNorm version (a custom mix)");
  cli.add_string("--attention", &o.attn, "attention version (a custom mix)");
  cli.add_string("--mlp", &o.mlp, "MLP version (a custom mix)");
  cli.add_string("--weights", &o.weights, "timm state dict as safetensors (default: seeded random weights)");
  cli.add_int("--classes", &o.classes, "classifier outputs (default 1000)");
  cli.add_int("--layers", &o.layers, "blocks (default the model's; fewer for quick checks)");
  cli.add_string("--images", &o.images, "safetensors file with `images` [batch, 3, S, S] (default: seeded)");
  cli.add_string("--calibration-images", &o.calibration_images,
                 "FP8 steps: safetensors file with `images` [n, 3, S, S] to calibrate the activation scales on "
                 "(default: 32 seeded images other than the timed ones)");
  cli.add_string("--logits-out", &o.logits_out, "write the logits of the checked forward here (safetensors)");
  cli.add_string("--breakdown", &o.breakdown_csv, "append per-component times of one eager forward to this CSV");
  cli.add_string("--task-times", &o.task_times_csv,
                 "the tile-scheduled steps (blocks=tiled): append every task of one eager forward (its start, inputs "
                 "ready and end, its SM) to this CSV");
  cli.add_string("--ref-cache", &o.cache_dir,
                 "folder for cached CPU reference logits (default: beside the executable)");
  cli.parse(argc, argv);
  o.streams_given = cli.given("--streams");
  return o;
}

// The step, or the step with some fields changed (a custom mix); the row's version names which.
encoder::Composition composition(Options& o, std::string* version) {
  const encoder::Composition step = encoder::find_step(study::kStageVersion);
  std::string changes = o.compose;
  for (const auto& [key, value] : {std::pair{"pe", &o.pe}, {"ln", &o.ln}, {"attn", &o.attn}, {"mlp", &o.mlp}})
    if (!value->empty()) changes += std::string(" ") + key + "=" + *value;
  encoder::Composition c = encoder::apply(step, changes);
  if (o.streams_given) {
    if (std::string(study::kStageVersion) != "e4_streams" && c == step && o.common.streams > 1)
      throw StudyError(ErrorKind::Usage, std::string("encoder ") + study::kStageVersion +
                                             " runs on one stream; --streams is for e4_streams and custom mixes");
    c.streams = o.common.streams;
  }
  o.common.streams = c.streams;  // the row records the streams used
  // A step keeps its name with any stream count (e4_streams' rows at 2, 4 and 8 streams).
  encoder::Composition named = step;
  named.streams = c.streams;
  *version = c == named ? std::string(study::kStageVersion) : "custom:" + c.to_string();
  return c;
}

// Images [n, 3, S, S] from a safetensors file, rounded to fp16; n = `batch`, or any n >= 1 when 0.
std::vector<float> read_images(const std::string& path, int batch, int image_size) {
  const ref::SafetensorsFile f(path);
  const auto shape = f.info("images").shape;
  if (shape.size() != 4 || shape[0] < 1 || (batch && shape[0] != batch) || shape[1] != study::kChannels ||
      shape[2] != image_size || shape[3] != image_size)
    throw StudyError(ErrorKind::Usage, "'" + path + "': `images` must be [" +
                                           (batch ? std::to_string(batch) : std::string("n")) + ", 3, " +
                                           std::to_string(image_size) + ", " + std::to_string(image_size) + "]");
  auto images = f.floats("images", shape);
  study::round_to_half(images);
  return images;
}

// The logits of one forward against the CPU reference (images 0 and batch - 1); the note of an
// ok row, or a `failed` row written and an empty note.
std::string check_logits(const Options& o, const encoder::Problem& p, const encoder::Composition& c,
                         const std::string& mix, const ref::VitWeights& w, const std::vector<float>& images, const std::vector<float>& got,
                         study::BenchReport& report) {
  std::size_t nonfinite = 0;
  for (float v : got) nonfinite += !std::isfinite(v);
  const std::vector<int> which = p.batch > 1 ? std::vector<int>{0, p.batch - 1} : std::vector<int>{0};
  const std::string cache = o.images.empty() ? o.cache_dir : "";  // the cache keys on seeded images only
  const auto want = encoder::reference_logits(w, images, which, encoder::weights_id(o.common.seed, o.weights),
                                              o.common.seed, cache);
  std::vector<float> g, r;
  for (std::size_t k = 0; k < which.size(); ++k) {
    g.insert(g.end(), got.begin() + static_cast<std::ptrdiff_t>(which[k]) * p.num_classes,
             got.begin() + static_cast<std::ptrdiff_t>(which[k] + 1) * p.num_classes);
    r.insert(r.end(), want[k].begin(), want[k].end());
  }
  const auto cmp = study::compare(g, r, c.fp8() ? encoder::fp8_logits_tolerance(r) : encoder::logits_tolerance(r));
  report.row.set("max_abs_err", cmp.max_abs).set("rel_l2_err", cmp.rel_l2);
  if (!cmp.ok || nonfinite) {
    report.write("failed", mix + "; logits check failed: " + cmp.summary() + ", " +
                               std::to_string(nonfinite) + " non-finite logits in the batch");
    return {};
  }
  return "logits of image" + std::string(which.size() > 1 ? "s 0 and " + std::to_string(p.batch - 1) : " 0") +
         " checked, every logit finite";
}

// Kernel launches of one eager forward (-1 where it cannot be captured), then the timed region
// and the host-to-host routine (images up from pinned memory, the forward, logits down).
int time_forward(const Options& o, const encoder::Problem& p, encoder::Forward& fwd,
                 study::DeviceBuffer<__half>& d_images, study::DeviceBuffer<__half>& d_logits,
                 study::BenchReport& report) {
  const __half* x = d_images.get();
  __half* y = d_logits.get();
  fwd.run_eager(x, y, nullptr);  // plans and first-call costs before counting
  CUDA_CHECK(cudaDeviceSynchronize());
  const int launches =
      fwd.capturable() ? study::count_kernel_launches([&](cudaStream_t s) { fwd.run_eager(x, y, s); }) : -1;
  if (launches >= 0) report.row.set("launches", launches);
  const auto t = study::timing_options(o.common, study::stage_program("encoder"));
  const auto forward = [&](cudaStream_t s) { fwd.run(x, y, s); };
  const study::Stats timed = study::time_region(forward, t);
  study::set_timing(report.row, timed, encoder::bytes(p), encoder::flops(p));
  study::set_energy(report.row, o.common, forward, timed.median, p.batch);
  study::PinnedBuffer<__half> h_images(d_images.size()), h_logits(d_logits.size());
  CUDA_CHECK(cudaMemcpy(h_images.get(), x, d_images.bytes(), cudaMemcpyDeviceToHost));
  const auto routine = study::time_routine(
      [&] {
        CUDA_CHECK(cudaMemcpyAsync(d_images.get(), h_images.get(), d_images.bytes(), cudaMemcpyHostToDevice, nullptr));
        fwd.run(x, y, nullptr);
        CUDA_CHECK(cudaMemcpyAsync(h_logits.get(), y, d_logits.bytes(), cudaMemcpyDeviceToHost, nullptr));
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
      },
      2, std::max(3, o.common.iters / 2));
  report.row.set("routine_us", routine.median);
  return launches;
}

// Every task of one eager forward of a tile-scheduled step, appended to --task-times' CSV.
void write_task_times(const Options& o, const std::string& version, const encoder::Problem& p,
                      const std::vector<encoder::TaskTime>& tasks) {
  const std::string header =
      "version,model,batch,image_size,ticket,kind,block,row_tile,col,slice,sm,start_us,ready_us,end_us,signals,waits,"
      "arrived_us,met_us";
  std::string first;
  if (std::ifstream in(o.task_times_csv); in) std::getline(in, first);
  if (!first.empty() && first != header)
    throw StudyError(ErrorKind::Usage, "task-times file '" + o.task_times_csv +
                                           "' has other columns than this build writes: write to a new file");
  std::ofstream f(o.task_times_csv, std::ios::app);
  if (!f) throw StudyError(ErrorKind::Usage, "cannot write task-times file '" + o.task_times_csv + "'");
  if (first.empty()) f << header << '\n';
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const encoder::TaskTime& t = tasks[i];
    f << version << ',' << o.common.model << ',' << p.batch << ',' << p.image_size << ',' << i << ',' << t.kind << ','
      << t.block << ',' << t.row_tile << ',' << t.col << ',' << t.slice << ',' << t.sm << ',' << t.start_us << ','
      << t.ready_us << ',' << t.end_us << ',' << t.signals << ',' << encoder::tiles::waits_text(t.waits) << ','
      << t.arrived_us << ',' << t.met_us << '\n';
  }
  if (!f) throw StudyError(ErrorKind::Usage, "cannot write task-times file '" + o.task_times_csv + "'");
}

// "name=us name=us ..." for the row's note, and the same appended to --breakdown's CSV.
std::string breakdown_text(const Options& o, const std::string& version, const encoder::Problem& p, int streams,
                           const encoder::Breakdown& b) {
  if (!o.breakdown_csv.empty()) {
    const bool fresh = access(o.breakdown_csv.c_str(), F_OK) != 0;
    std::ofstream f(o.breakdown_csv, std::ios::app);
    if (!f) throw StudyError(ErrorKind::Usage, "cannot write breakdown file '" + o.breakdown_csv + "'");
    if (fresh) f << "version,model,batch,image_size,streams,component,us\n";
    for (const auto& [name, us] : b.us)
      f << version << ',' << o.common.model << ',' << p.batch << ',' << p.image_size << ',' << streams << ',' << name
        << ',' << us << '\n';
  }
  std::string s;
  char buf[96];
  for (const auto& [name, us] : b.us) {
    std::snprintf(buf, sizeof buf, "%s%s=%.1f", s.empty() ? "" : " ", name.c_str(), us);
    s += buf;
  }
  return s;
}

int bench(Options& o, study::BenchReport& report) {
  encoder::Problem p;
  p.model = study::find_model(o.common.model);
  if (o.layers > 0) p.model.layers = o.layers;
  p.batch = o.common.batch;
  p.image_size = o.common.image_size;
  p.num_classes = o.classes;
  if (auto why = encoder::check_problem(p); !why.empty()) throw StudyError(ErrorKind::Usage, why);
  std::string version;
  const encoder::Composition c = composition(o, &version);

  if (!o.task_times_csv.empty() && !c.tiled())
    throw StudyError(ErrorKind::Usage, "--task-times: only the tile-scheduled blocks (blocks=tiled) run tasks, not "
                                       "blocks=" + std::string(encoder::name(c.blocks)));
  report.open(o.common);
  report.row = study::base_row(o.common, "encoder", version);
  report.row.set("tokens", p.tokens()).set("hidden", p.model.hidden).set("heads", p.model.heads);
  report.row.set("head_dim", p.model.head_dim()).set("host_syncs", 0).set("rows", p.rows());
  report.row.set("precision", c.precision());
  study::require_gpu(o.common.device);
  if (auto why = encoder::why_unavailable(c); !why.empty()) {
    report.write("skipped", why);
    return 0;
  }
  const std::string mix = c.to_string() + (o.layers > 0 ? " layers=" + std::to_string(o.layers) : "");
  study::require_memory(encoder::memory_need(p, c), "encoder " + version + " at batch " + std::to_string(p.batch) +
                                                        " image " + std::to_string(p.image_size) + " " + o.common.model);
  const std::vector<float> images = o.images.empty() ? encoder::make_images(p.batch, p.image_size, o.common.seed)
                                                     : read_images(o.images, p.batch, p.image_size);
  const ref::VitWeights w = encoder::make_weights(p, o.common.seed, o.weights);
  encoder::Session session(w, p.model, p.image_size, c, o.common.device);
  session.set_budget_bytes(SIZE_MAX);  // the one forward timed, whatever its size
  const std::vector<float> calibration =
      o.calibration_images.empty() ? std::vector<float>{} : read_images(o.calibration_images, 0, p.image_size);
  auto d_images = study::to_device(study::to_half(images));
  study::DeviceBuffer<__half> d_logits(static_cast<std::size_t>(p.batch) * p.num_classes);
  encoder::Forward* fwd = nullptr;
  try {
    encoder::calibrate_if_fp8(session, p, calibration, o.common.seed);
    fwd = &session.forward(p.batch, p.image_size);
  } catch (const StudyError& e) {
    if (e.kind != ErrorKind::Usage) throw;
    report.write("skipped", e.what());  // a component refuses this problem
    return 0;
  }

  std::string check_note = "not checked (--no-check)";
  if (o.common.check || !o.logits_out.empty()) {
    study::poison(d_logits);
    fwd->run(d_images.get(), d_logits.get(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = study::to_float(study::to_host(d_logits));
    if (!o.logits_out.empty()) ref::write_safetensors(o.logits_out, {{"logits", {p.batch, p.num_classes}, got}});
    if (o.common.check && (check_note = check_logits(o, p, c, mix, w, images, got, report)).empty()) return 1;
    // A tile-scheduled forward whose counters are not a complete forward's ran on a wait that
    // timed out: its logits may still pass, its time would not be a forward's.
    if (const std::string state = fwd->dependency_state(); !state.empty()) {
      report.write("failed", mix + "; dependency counters after the checked forward: " + state);
      return 1;
    }
  }
  const int launches = time_forward(o, p, *fwd, d_images, d_logits, report);
  const encoder::Breakdown parts = fwd->breakdown(d_images.get(), d_logits.get(), nullptr);
  if (!o.task_times_csv.empty())
    write_task_times(o, version, p, fwd->task_times(d_images.get(), d_logits.get(), nullptr));
  char extra[160];
  std::snprintf(extra, sizeof extra, "; activations %.1f MB, weights %.1f MB; %.1f launches per layer",
                fwd->activation_bytes() / 1e6, session.weight_bytes() / 1e6,
                launches >= 0 ? static_cast<double>(launches) / p.model.layers : NAN);
  std::string cutlass_kernels;  // the kernel each CUTLASS GEMM shape ran with (none: empty)
  for (const auto& line : study::cutlass_gemm::choices()) cutlass_kernels += "; cutlass " + line;
  report.write("ok", mix + "; " + check_note + "; " + (c.graph ? "cuda-graph replay" : "cuda events per call") +
                         extra + "; eager breakdown us: " + breakdown_text(o, version, p, c.streams, parts) +
                         cutlass_kernels);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main(study::stage_program("encoder").c_str(), [&](study::BenchReport& report) {
    Options o = parse_options(argc, argv);
    if (o.list_steps || o.list_fields) {
      std::fputs((o.list_steps ? encoder::steps_tsv() : encoder::fields_tsv()).c_str(), stdout);
      return 0;
    }
    return bench(o, report);
  });
}
