#include "harness/csv.hpp"
#include <cmath>
#include <cstdio>
#include <set>
#include <sys/stat.h>
#include "harness/check.hpp"

namespace study {

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> c = {
      "run_id", "utc", "commit", "gpu", "sm_count", "driver", "cuda", "cudnn", "cublas", "host",
      "family", "version", "model", "batch", "image_size", "tokens", "hidden", "heads",
      "head_dim", "streams", "warmup", "iters", "flush_l2", "mean_us", "std_us", "median_us",
      "min_us", "max_us", "routine_us", "gbps", "tflops", "launches", "host_syncs",
      "device_bytes", "host_bytes", "max_abs_err", "rel_l2_err", "status", "note",
      // Appended later, so that readers of older files keep their column positions.
      "rows", "h2d_us", "preprocess_us", "d2h_us", "sm_clock_mhz", "mem_clock_mhz",
      "power_limit_w", "precision",
      "energy_j", "images_per_j", "power_w", "energy_sm_clock_mhz", "energy_s", "energy_calls", "energy_why_not"};
  return c;
}

static bool known_column(const std::string& c) {
  for (const auto& k : csv_columns())
    if (k == c) return true;
  return false;
}

Row& Row::set(const std::string& column, const std::string& value) {
  if (!known_column(column)) throw std::logic_error("CSV schema has no column '" + column + "'");
  values_[column] = value;
  return *this;
}

Row& Row::set(const std::string& column, double value) {
  if (!std::isfinite(value)) return set(column, std::string(std::isnan(value) ? "nan" : "inf"));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return set(column, std::string(buf));
}

Row& Row::set(const std::string& column, long long value) { return set(column, std::to_string(value)); }

std::string Row::get(const std::string& column) const {
  auto it = values_.find(column);
  return it == values_.end() ? std::string() : it->second;
}

std::string csv_escape(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string out = "\"";
  for (char ch : f) {
    if (ch == '"') out += '"';
    out += (ch == '\n' || ch == '\r') ? ' ' : ch;
  }
  return out + "\"";
}

std::string csv_header() {
  std::string header;
  for (const auto& c : csv_columns()) header += (header.empty() ? "" : ",") + c;
  return header;
}

static std::vector<std::string> split_header(const std::string& line) {
  std::vector<std::string> out(1);
  for (char ch : line) {
    if (ch == ',') out.emplace_back();
    else if (ch != '\r' && ch != '"') out.back() += ch;
  }
  return out;
}

std::string header_difference(const std::string& line) {
  if (line == csv_header()) return "";
  const auto got = split_header(line);
  const auto& want = csv_columns();
  const std::set<std::string> got_set(got.begin(), got.end()), want_set(want.begin(), want.end());
  std::string missing, extra;
  for (const auto& c : want)
    if (!got_set.count(c)) missing += (missing.empty() ? "" : ", ") + c;
  for (const auto& c : got)
    if (!want_set.count(c)) extra += (extra.empty() ? "" : ", ") + (c.empty() ? "(empty)" : c);
  std::string d;
  if (!missing.empty()) d = "lacks column(s) " + missing;
  if (!extra.empty()) d += (d.empty() ? "" : "; ") + std::string("has unknown column(s) ") + extra;
  return d.empty() ? "has the same columns in another order" : d;
}

CsvWriter::CsvWriter(const std::string& path, int device) : device_(device) {
  if (path.empty()) return;
  // Rows appended under a different header would land in the wrong columns: refuse instead.
  if (std::FILE* old = std::fopen(path.c_str(), "r")) {
    std::string first;
    for (int ch; (ch = std::fgetc(old)) != EOF && ch != '\n';) first += static_cast<char>(ch);
    std::fclose(old);
    if (!first.empty()) {
      const std::string diff = header_difference(first);
      if (!diff.empty())
        throw StudyError(ErrorKind::Usage, "CSV file '" + path + "' " + diff +
                                               " of this build's schema: write to a new file");
    }
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw StudyError(ErrorKind::Usage, "cannot write CSV file '" + path + "'");
  struct stat st {};
  if (fstat(fileno(file_), &st) == 0 && st.st_size == 0) {
    std::fprintf(file_, "%s\n", csv_header().c_str());
    std::fflush(file_);
  }
}

CsvWriter::~CsvWriter() {
  if (file_) std::fclose(file_);
}

void CsvWriter::write(const Row& row_in) {
  Row row = row_in;
  const Provenance& p = provenance(device_);
  const std::pair<const char*, const std::string*> prov[] = {
      {"run_id", &p.run_id}, {"utc", &p.utc}, {"commit", &p.commit}, {"gpu", &p.gpu},
      {"sm_count", &p.sm_count}, {"driver", &p.driver}, {"cuda", &p.cuda}, {"cudnn", &p.cudnn},
      {"cublas", &p.cublas}, {"host", &p.host}, {"power_limit_w", &p.power_limit_w}};
  for (const auto& [col, val] : prov)
    if (row.get(col).empty()) row.set(col, *val);
  // Clocks are read as each row is written, right after its timing, so they show the clocks
  // under load rather than those of an idle GPU at start-up.
  const GpuClocks clocks = gpu_clocks(device_);
  if (row.get("sm_clock_mhz").empty()) row.set("sm_clock_mhz", clocks.sm_mhz);
  if (row.get("mem_clock_mhz").empty()) row.set("mem_clock_mhz", clocks.mem_mhz);
  std::printf("%-8s %-14s %-20s batch=%-4s image=%-4s tokens=%-5s hidden=%-5s median_us=%-10s gbps=%-8s tflops=%-8s %s %s\n",
              row.get("family").c_str(), row.get("version").c_str(), row.get("model").c_str(),
              row.get("batch").c_str(), row.get("image_size").c_str(), row.get("tokens").c_str(),
              row.get("hidden").c_str(), row.get("median_us").c_str(), row.get("gbps").c_str(),
              row.get("tflops").c_str(), row.get("status").c_str(), row.get("note").c_str());
  std::fflush(stdout);
  if (!file_) return;
  std::string line;
  for (const auto& c : csv_columns()) line += (line.empty() ? "" : ",") + csv_escape(row.get(c));
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

}  // namespace study
