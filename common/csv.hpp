// Result rows in the study's one CSV schema (DESIGN.md), with run provenance filled in.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace study {

// Column order of every CSV the study writes (benches, PyTorch anchors, ceilings).
const std::vector<std::string>& csv_columns();

// Where and with what a row was measured; gathered once per process.
struct Provenance {
  std::string run_id, utc, commit, gpu, sm_count, driver, cuda, cudnn, cublas, host;
};
const Provenance& provenance(int device = 0);

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
