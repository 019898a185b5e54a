// Reader (and a small F32 writer) for the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {...}}, then the data section that the offsets index. Everything is validated on open, so a
// malformed or truncated file fails with study::StudyError(Data, "<file>: <reason>") instead of
// yielding garbage weights.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ref {

struct TensorInfo {
  std::string dtype;                // as in the file: "F32", "F16", "BF16", "I64", ...
  std::vector<std::int64_t> shape;  // empty for a scalar
  std::size_t begin = 0, end = 0;   // byte offsets into the data section
  std::size_t numel() const;
};

class SafetensorsFile {
 public:
  // Reads the whole file and validates header and offsets.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo& info(const std::string& name) const;  // throws Data when missing

  // The tensor converted to float (from F32, F16, BF16 or F64). The first form also checks the
  // shape; both throw Data for a missing tensor, a mismatch or another dtype.
  std::vector<float> floats(const std::string& name, const std::vector<std::int64_t>& expected_shape) const;
  std::vector<float> floats(const std::string& name) const;

 private:
  [[noreturn]] void fail(const std::string& reason) const;
  std::string path_;
  std::vector<unsigned char> data_;  // the data section only
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Writes F32 tensors in the order given. Throws Usage when data and shape disagree or the file
// cannot be written.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

std::string shape_string(const std::vector<std::int64_t>& shape);  // "[2, 3]"

}  // namespace ref
