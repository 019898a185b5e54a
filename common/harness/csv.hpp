// Result rows in the study's one CSV schema (columns described in docs/method.md), with run
// provenance filled in.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace study {

// Column order of every CSV the study writes (benches, PyTorch anchors, ceilings).
const std::vector<std::string>& csv_columns();
// The header line of that schema (no newline).
std::string csv_header();
// Empty when `header_line` is this schema's header, else what differs (missing and unknown
// columns), for the one-line refusal to append to a file of another schema.
std::string header_difference(const std::string& header_line);

// Where and with what a row was measured; gathered once per process.
struct Provenance {
  std::string run_id, utc, commit, gpu, sm_count, driver, cuda, cudnn, cublas, host;
  std::string power_limit_w;  // enforced board power limit; empty where NVML cannot tell
};
const Provenance& provenance(int device = 0);

// Current SM and memory clocks (MHz) from NVML, each empty where it cannot be read (no
// driver library, no GPU, or the query not supported).
struct GpuClocks {
  std::string sm_mhz, mem_mhz;
};
GpuClocks gpu_clocks(int device = 0);

class Row {
 public:
  Row& set(const std::string& column, const std::string& value);
  Row& set(const std::string& column, const char* value) { return set(column, std::string(value)); }
  Row& set(const std::string& column, double value);
  Row& set(const std::string& column, long long value);
  Row& set(const std::string& column, int value) { return set(column, static_cast<long long>(value)); }
  Row& set(const std::string& column, bool value) { return set(column, value ? "1" : "0"); }
  std::string get(const std::string& column) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

std::string csv_escape(const std::string& field);

// Appends rows to a CSV file (header written when the file is new or empty); each row is
// flushed as written so a killed run keeps what it finished. Also echoes a short line to stdout.
// A file that already starts with another header is refused (StudyError(Usage), exit 2).
class CsvWriter {
 public:
  // path empty: stdout summary only. Throws StudyError(Usage) if the file cannot be written.
  explicit CsvWriter(const std::string& path, int device = 0);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;
  void write(const Row& row);

 private:
  std::FILE* file_ = nullptr;
  int device_;
};

}  // namespace study
