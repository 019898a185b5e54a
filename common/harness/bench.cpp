#include "harness/bench.hpp"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/energy.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"
#include "harness/timing.hpp"
#include "harness/vit_config.hpp"

namespace study {

void BenchReport::write(const std::string& status, const std::string& note) {
  row.set("status", status);
  row.set("note", note);
  row.set("device_bytes", static_cast<long long>(device_bytes_in_use()));
  row.set("host_bytes", static_cast<long long>(host_bytes_in_use()));
  if (writer) writer->write(row);
  written = true;
}

Row base_row(const CommonOptions& o, const std::string& family, const std::string& version) {
  Row r;
  r.set("family", family).set("version", version).set("model", o.model).set("batch", o.batch);
  r.set("image_size", o.image_size).set("warmup", o.warmup);
  // "sm" (0) is not a count yet: the column stays empty until resolve_streams() knows it.
  if (o.streams > 0) r.set("streams", o.streams);
  r.set("iters", o.iters).set("flush_l2", o.flush_l2);
  r.set("precision", "fp16");  // the GEMM operands' type; FP8 versions say fp8_e4m3
  return r;
}

void set_timing(Row& row, const Stats& s, double bytes, double flops) {
  row.set("mean_us", s.mean).set("std_us", s.std).set("median_us", s.median);
  row.set("min_us", s.min).set("max_us", s.max);
  if (s.median > 0) {
    row.set("gbps", bytes / (s.median * 1e-6) / 1e9);
    row.set("tflops", flops / (s.median * 1e-6) / 1e12);
  }
}

TimingOptions timing_options(const CommonOptions& o, const std::string& label) {
  TimingOptions t;
  t.warmup = o.warmup;
  t.iters = o.iters;
  t.flush_l2 = o.flush_l2;
  t.label = label;
  return t;
}

int problem_rows(const CommonOptions& o, bool rows_given, int rows) {
  if (rows_given) return rows;
  const long long all = static_cast<long long>(o.batch) * tokens_for_image(o.image_size);
  if (all > (1LL << 31) - 1) throw StudyError(ErrorKind::Usage, "batch * tokens overflows the row count");
  return static_cast<int>(all);
}

void set_energy(Row& row, const CommonOptions& o, const std::function<void(cudaStream_t)>& run, double median_us,
                int images, cudaStream_t stream) {
  if (!(o.energy_seconds > 0)) return;
  const Energy e = measure_energy(run, stream, o.device, median_us, images, o.energy_seconds);
  if (!e.why_not.empty()) {
    row.set("energy_why_not", e.why_not);
    return;
  }
  row.set("energy_j", e.joules_per_call).set("images_per_j", e.images_per_joule).set("power_w", e.watts);
  row.set("energy_s", e.seconds).set("energy_calls", e.calls);
  if (e.sm_mhz > 0) row.set("energy_sm_clock_mhz", e.sm_mhz);
}

void measure(BenchReport& report, const CommonOptions& o, const std::string& label,
             const std::function<void(cudaStream_t)>& run, double bytes, double flops) {
  const Stats s = time_region(run, timing_options(o, label));
  set_timing(report.row, s, bytes, flops);
  set_energy(report.row, o, run, s.median, o.batch);
  // Counted after timing, by capturing one call (nothing runs): the eager calls above made the
  // plans, kernel searches (which the CUTLASS layer refuses to run inside a capture) and kernel
  // attributes first, also under --no-check.
  report.row.set("launches", count_kernel_launches(run));
}

std::string measure_uncaptured(BenchReport& report, const CommonOptions& o, const std::string& label,
                               const std::function<void(cudaStream_t)>& run, double bytes, double flops,
                               double launches, double host_syncs) {
  report.row.set("launches", static_cast<long long>(launches))
      .set("host_syncs", static_cast<long long>(host_syncs));
  const Stats s = time_region(run, timing_options(o, label));
  set_timing(report.row, s, bytes, flops);
  set_energy(report.row, o, run, s.median, o.batch);
  return "timed as a host-driven routine (cuda events around each whole call, not captured); "
         "launches and host syncs counted analytically";
}

void set_routine(Row& row, const RoutineTimes& t, bool has_preprocess) {
  row.set("routine_us", t.total.median).set("h2d_us", t.h2d.median).set("d2h_us", t.d2h.median);
  if (has_preprocess) row.set("preprocess_us", t.preprocess.median);
}

std::string resolve_streams(CommonOptions& o, Row& row) {
  if (o.streams > 0) {
    row.set("streams", o.streams);
    return {};
  }
  const int sms = sm_count(o.device);
  o.streams = sms;
  row.set("streams", o.streams);
  return "streams=sm: " + std::to_string(sms) + " (the device's SM count)";
}

bool refuse_streams(BenchReport& report, const CommonOptions& o, const std::string& bench) {
  if (o.streams == 1) return false;
  report.write("skipped", "the " + bench + " bench runs on one stream (--streams 1 only, got " +
                              (o.streams > 0 ? std::to_string(o.streams) : std::string("sm")) + ")");
  return true;
}

bool open_probe(BenchReport& report, const CommonOptions& o, const std::string& name) {
  report.open(o);
  report.row = base_row(o, "probes", name);
  report.row.set("model", "").set("batch", "").set("image_size", "").set("host_syncs", 0).set("precision", "");
  require_gpu(o.device);
  return !refuse_streams(report, o, name);
}

int bench_main(const char* program, const std::function<int(BenchReport&)>& body) {
  BenchReport report;
  return run_main(program, [&]() -> int {
    try {
      return body(report);
    } catch (const StudyError& e) {
      // No GPU, or a problem larger than the memory free here: nothing about the version
      // failed, the configuration cannot run on this machine.
      const bool cannot_run = e.kind == ErrorKind::NoGpu || e.kind == ErrorKind::OutOfMemory;
      if (report.writer && !report.written && e.kind != ErrorKind::Usage)
        report.write(cannot_run ? "skipped" : "failed", e.what());
      throw;
    }
  });
}

}  // namespace study
