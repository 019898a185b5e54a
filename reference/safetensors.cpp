#include "safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/check.hpp"

namespace ref {

namespace {

using study::ErrorKind;
using study::StudyError;

// Bytes per element of every dtype the format defines; anything else is a malformed header.
std::size_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// The format is little-endian whatever the host is, so bytes are assembled explicitly.
std::uint64_t read_le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

float f16_to_float(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0)
    v = std::ldexp(mantissa, -24);  // zero and subnormals
  else if (exponent == 31)
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(1024 + mantissa, exponent - 25);
  return static_cast<float>(sign ? -v : v);
}

float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

std::size_t TensorInfo::numel() const {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void SafetensorsFile::fail(const std::string& reason) const {
  throw StudyError(ErrorKind::Data, path_ + ": " + reason);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open for reading");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("read error");

  if (bytes.size() < 8)
    fail("file is " + std::to_string(bytes.size()) + " bytes, too short for the 8-byte header length");
  const std::uint64_t header_len = read_le(bytes.data(), 8);
  if (header_len > bytes.size() - 8)
    fail("header length " + std::to_string(header_len) + " exceeds the " + std::to_string(bytes.size() - 8) +
         " bytes after the length field (truncated, or not a safetensors file)");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const nlohmann::json::parse_error& e) {
    fail(std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) fail("header is JSON but not an object");

  data_.assign(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len), bytes.end());
  bytes.clear();
  bytes.shrink_to_fit();

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("__metadata__ value of '" + key + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object()) fail(where + "entry is not an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(where + "dtype missing or not a string");
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(where + "shape missing or not an array");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      fail(where + "data_offsets missing or not an array of two integers");

    TensorInfo t;
    t.dtype = entry["dtype"].get<std::string>();
    const std::size_t esize = dtype_bytes(t.dtype);
    if (esize == 0) fail(where + "unknown dtype '" + t.dtype + "'");

    for (const auto& d : entry["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        fail(where + "shape " + entry["shape"].dump() + " has an entry that is not a non-negative integer");
      t.shape.push_back(d.get<std::int64_t>());
    }
    // Bounded by the data size on the way, so that the element count cannot overflow.
    std::size_t numel = 0;
    if (std::find(t.shape.begin(), t.shape.end(), 0) == t.shape.end()) {
      numel = 1;
      for (auto d : t.shape) {
        const auto dim = static_cast<std::size_t>(d);
        if (numel > data_.size() / dim)
          fail(where + "shape " + shape_string(t.shape) + " needs more bytes than the file has");
        numel *= dim;
      }
    }

    for (const auto& o : entry["data_offsets"])
      if (!o.is_number_integer() || o.get<std::int64_t>() < 0)
        fail(where + "data_offsets " + entry["data_offsets"].dump() + " are not non-negative integers");
    t.begin = static_cast<std::size_t>(entry["data_offsets"][0].get<std::int64_t>());
    t.end = static_cast<std::size_t>(entry["data_offsets"][1].get<std::int64_t>());
    if (t.begin > t.end) fail(where + "data_offsets " + entry["data_offsets"].dump() + " begin after they end");
    if (t.end > data_.size())
      fail(where + "data_offsets " + entry["data_offsets"].dump() + " run past the end of the " +
           std::to_string(data_.size()) + "-byte data section (truncated file?)");
    if (t.end - t.begin != numel * esize)
      fail(where + "data_offsets " + entry["data_offsets"].dump() + " span " + std::to_string(t.end - t.begin) +
           " bytes, but " + t.dtype + " " + shape_string(t.shape) + " needs " + std::to_string(numel * esize));
    tensors_.emplace(name, std::move(t));
  }

  // As the format requires: tensors tile the data section, no overlap, no gap, nothing after.
  std::vector<std::pair<std::size_t, std::string>> order;
  for (const auto& [name, t] : tensors_) order.emplace_back(t.begin, name);
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : tensors_.at(a.second).end < tensors_.at(b.second).end;
  });
  std::size_t covered = 0;
  for (const auto& [begin, name] : order) {
    if (begin < covered) fail("tensor '" + name + "' overlaps the tensor before it in the data section");
    if (begin > covered) fail("data section has unused bytes before tensor '" + name + "'");
    covered = tensors_.at(name).end;
  }
  if (covered != data_.size())
    fail("data section has " + std::to_string(data_.size() - covered) + " bytes after the last tensor");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> n;
  for (const auto& kv : tensors_) n.push_back(kv.first);
  return n;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("missing tensor '" + name + "'");
  return it->second;
}

std::vector<float> SafetensorsFile::floats(const std::string& name,
                                           const std::vector<std::int64_t>& expected_shape) const {
  const TensorInfo& t = info(name);
  if (t.shape != expected_shape)
    fail("tensor '" + name + "' has shape " + shape_string(t.shape) + ", expected " + shape_string(expected_shape));
  return floats(name);
}

std::vector<float> SafetensorsFile::floats(const std::string& name) const {
  const TensorInfo& t = info(name);
  const std::size_t n = t.numel();
  const unsigned char* p = data_.data() + t.begin;
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    for (std::size_t i = 0; i < n; ++i) out[i] = bits_to_float(static_cast<std::uint32_t>(read_le(p + 4 * i, 4)));
  } else if (t.dtype == "F16") {
    for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_float(static_cast<std::uint16_t>(read_le(p + 2 * i, 2)));
  } else if (t.dtype == "BF16") {
    // bf16 is the upper half of an fp32.
    for (std::size_t i = 0; i < n; ++i) out[i] = bits_to_float(static_cast<std::uint32_t>(read_le(p + 2 * i, 2)) << 16);
  } else if (t.dtype == "F64") {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t bits = read_le(p + 8 * i, 8);
      double d;
      std::memcpy(&d, &bits, sizeof d);
      out[i] = static_cast<float>(d);
    }
  } else {
    fail("tensor '" + name + "' has dtype " + t.dtype + "; only F32, F16, BF16 and F64 convert to float");
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || !seen.insert(t.name).second)
      throw StudyError(ErrorKind::Usage, path + ": tensor name '" + t.name + "' is reserved or repeated");
    std::size_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<std::size_t>(std::max<std::int64_t>(d, 0));
    if (numel != t.data.size())
      throw StudyError(ErrorKind::Usage, path + ": tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                                             " values for shape " + shape_string(t.shape));
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * numel}}};
    offset += 4 * numel;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned

  std::vector<unsigned char> bytes;
  bytes.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(text.size() >> (8 * i)));
  bytes.insert(bytes.end(), text.begin(), text.end());
  for (const auto& t : tensors)
    for (float f : t.data) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(bits >> (8 * i)));
    }

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw StudyError(ErrorKind::Usage, path + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw StudyError(ErrorKind::Usage, path + ": write failed");
}

}  // namespace ref
