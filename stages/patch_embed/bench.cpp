// One bench for every patch-embedding version (compiled once; each version's executable links it
// with its name, study::kStageVersion):
// check against the CPU reference on the exact shape, time the device-resident call (device
// images in, token rows out), then the host-to-host routine (pinned images -> H2D -> version ->
// D2H) with its split, and write one CSV row. cpu_baseline is timed on the CPU instead.
#include <algorithm>
#include <cstdio>
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/random.hpp"
#include "harness/stage_version.hpp"
#include "harness/timing.hpp"
#include "harness/vit_config.hpp"
#include "patch_embed/harness.hpp"

namespace {

using patch_embed::Problem;
using patch_embed::Version;

constexpr double kTimelineMaxLaunches = 1e5;  // two events per launch, kept in host memory

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

void write_timeline(const std::string& path, const Version& v, const Problem& p, patch_embed::DeviceProblem& dev) {
  const std::size_t n = static_cast<std::size_t>(v.launch_count(p) - 2);  // kernels on the forked streams
  patch_embed::Timeline tl(n);
  v.launch(p, dev.args(&tl), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) throw study::StudyError(study::ErrorKind::Usage, "cannot write timeline file '" + path + "'");
  std::fseek(f, 0, SEEK_END);
  if (std::ftell(f) == 0) std::fprintf(f, "version,batch,image_size,hidden,streams,stream,launch,start_us,end_us\n");
  for (std::size_t i = 0; i < tl.used; ++i) {
    float start = 0, end = 0;
    CUDA_CHECK(cudaEventElapsedTime(&start, tl.origin, tl.start[i]));
    CUDA_CHECK(cudaEventElapsedTime(&end, tl.origin, tl.end[i]));
    std::fprintf(f, "%s,%d,%d,%d,%d,%d,%zu,%.3f,%.3f\n", v.name, p.batch, p.image_size, p.hidden, p.streams,
                 tl.stream[i], i, 1000.0 * start, 1000.0 * end);
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main(study::stage_program("patch_embed").c_str(), [&](study::BenchReport& report) {
    study::CommonOptions o;
    int hidden = 0;
    bool force = false;
    std::string timeline;
    study::Cli cli(study::stage_program("patch_embed"),
                   "ViT patch embedding (conv 16x16 stride 16, cls token, position embedding) of "
                   "[batch, 3, S, S] fp16 images: check, time, one CSV row.");
    cli.add_common(o);
    cli.add_int("--hidden", &hidden, "output channels (default the model's hidden size)");
    cli.add_flag("--force", &force, "time even above the version's work budget");
    cli.add_string("--timeline", &timeline,
                   "v3_streams / v3_streams_graph: append per-launch start/end times (us, CUDA events, "
                   "one extra untimed call) to this CSV");
    cli.add_version_list(study::version_names(patch_embed::versions()));
    cli.parse(argc, argv);
    study::validate_common(o);

    const auto& model = study::find_model(o.model);
    const int tokens = study::tokens_for_image(o.image_size);
    Problem p;
    p.batch = o.batch;
    p.image_size = o.image_size;
    p.hidden = cli.given("--hidden") ? hidden : model.hidden;
    p.streams = o.streams;
    const auto& version = patch_embed::find_version(study::kStageVersion);
    if (!timeline.empty()) {
      if (!version.multi_stream)
        throw study::StudyError(study::ErrorKind::Usage,
                                std::string("--timeline is for the stream versions (v3_streams, v3_streams_graph), not ") +
                                    study::kStageVersion);
      std::FILE* f = std::fopen(timeline.c_str(), "a");
      if (!f) throw study::StudyError(study::ErrorKind::Usage, "cannot write timeline file '" + timeline + "'");
      std::fclose(f);
    }

    report.open(o);
    report.row = study::base_row(o, "patch_embed", version.name);
    report.row.set("tokens", tokens).set("hidden", p.hidden);
    report.row.set("rows", static_cast<long long>(p.batch) * tokens);  // token rows written
    study::require_gpu(o.device);
    std::string note = "B=" + std::to_string(p.batch) + " S=" + std::to_string(p.image_size) +
                       " hidden=" + std::to_string(p.hidden);
    if (const auto s = study::resolve_streams(o, report.row); !s.empty()) note += "; " + s;
    p.streams = o.streams;
    if (auto why = version.supports(p); !why.empty()) {
      report.write("skipped", note + "; " + why);
      return 0;
    }
    const double work = patch_embed::work(version, p);
    if (version.bench_max_work > 0 && work > version.bench_max_work && !force) {
      report.write("skipped", note + "; " + fmt("%.3g ", work) + version.work_unit +
                                  " per call is above this version's work budget of " +
                                  fmt("%.3g", version.bench_max_work) + " (minutes per call); --force times it anyway");
      return 0;
    }
    if (!timeline.empty() && work > kTimelineMaxLaunches)
      throw study::StudyError(study::ErrorKind::Usage, "--timeline records at most 1e5 launches; this shape has " +
                                                           fmt("%.3g", work));

    study::require_memory(patch_embed::memory_need(p, version, o.check),
                          study::stage_program("patch_embed") + " at " + note);
    const auto in = patch_embed::make_inputs(p, o.seed);
    patch_embed::DeviceProblem dev(p, version, in);
    std::string check_note = "not checked (--no-check)";
    if (o.check) {
      const auto c = patch_embed::run_and_check(version, p, in, dev);
      report.row.set("max_abs_err", c.cmp.max_abs).set("rel_l2_err", c.cmp.rel_l2);
      if (!c.ok()) {
        report.write("failed", note + "; reference check failed: " + c.summary());
        return 1;
      }
      check_note = c.gpu_checked ? "checked all " + std::to_string(c.images_total) +
                                       " images against the GPU reference, " + std::to_string(c.images_checked) +
                                       " also against the CPU reference"
                                 : "checked " + std::to_string(c.images_checked) + "/" +
                                       std::to_string(c.images_total) + " images";
    }
    note += "; " + check_note;

    if (version.on_host) {
      // Seconds per call at large shapes: fewer repeats there, and the row records them.
      if (work > 1e9) {
        o.warmup = std::min(o.warmup, 1);
        o.iters = std::min(o.iters, 3);
        report.row.set("warmup", o.warmup).set("iters", o.iters);
      }
      std::vector<float> out(static_cast<std::size_t>(p.batch) * tokens * p.hidden);
      const patch_embed::HostArgs ha{in.images.data(), in.conv_w.data(), in.conv_b.data(), in.cls_token.data(),
                                     in.pos_embed.data(), out.data()};
      const auto s = study::time_routine([&] { patch_embed::cpu_forward(p, ha); }, o.warmup, o.iters);
      study::set_timing(report.row, s, patch_embed::bytes(p), patch_embed::flops(p));
      report.row.set("routine_us", s.median).set("launches", 0).set("host_syncs", 0);
      report.write("ok", note + "; timed on the CPU (one thread, steady_clock per call; inputs already in "
                                "host memory, so the routine is the computation)");
      return 0;
    }

    const auto args = dev.args();
    const auto run = [&](cudaStream_t s) { version.launch(p, args, s); };
    if (version.capturable) {
      study::measure(report, o, study::stage_program("patch_embed"), run, patch_embed::bytes(p), patch_embed::flops(p));
      report.row.set("host_syncs", version.host_sync_count ? version.host_sync_count(p) : 0.0);
      note += "; cuda events per call";
    } else {
      note += "; " + study::measure_uncaptured(report, o, study::stage_program("patch_embed"), run, patch_embed::bytes(p),
                                               patch_embed::flops(p), version.launch_count(p),
                                               version.host_sync_count(p));
    }

    // The routine a host caller sees: pinned images in, pinned token rows out.
    const std::size_t image_elems = dev.images.size(), out_elems = dev.out.size();
    study::PinnedBuffer<__half> host_images(image_elems), host_out(out_elems);
    const auto half_images = study::to_half(in.images);
    std::copy(half_images.begin(), half_images.end(), host_images.get());
    study::RoutinePhases ph;
    ph.h2d = [&](cudaStream_t s) {
      CUDA_CHECK(cudaMemcpyAsync(dev.images.get(), host_images.get(), image_elems * sizeof(__half),
                                 cudaMemcpyHostToDevice, s));
    };
    if (version.preprocess) ph.preprocess = [&](cudaStream_t s) { version.preprocess(p, args, s); };
    ph.compute = [&](cudaStream_t s) { (version.compute ? version.compute : version.launch)(p, args, s); };
    ph.d2h = [&](cudaStream_t s) {
      CUDA_CHECK(cudaMemcpyAsync(host_out.get(), dev.out.get(), out_elems * sizeof(__half),
                                 cudaMemcpyDeviceToHost, s));
    };
    study::TimingOptions t;
    t.warmup = std::min(o.warmup, 2);  // the device-resident timing above already warmed up
    t.iters = o.iters;
    t.flush_l2 = o.flush_l2;
    t.label = study::stage_program("patch_embed") + "_routine";
    study::set_routine(report.row, study::time_routine_phases(ph, t), version.preprocess != nullptr);
    note += "; routine: pinned host images, H2D, " + std::string(version.preprocess ? "preprocessing, " : "") +
            "version, D2H (cuda events, medians)";

    if (!timeline.empty()) {
      write_timeline(timeline, version, p, dev);
      note += "; timeline written";
    }
    report.write("ok", note);
    return 0;
  });
}
