// The safetensors reader: a round trip, hand-encoded half types, and every malformed case
// failing as a Data error that names the file and the reason.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/check.hpp"
#include "reference.hpp"
#include "safetensors.hpp"

namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("study_ref_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A file with any header text and data bytes; header_len overrides the length field.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               long long header_len = -1) {
  const unsigned long long n = header_len < 0 ? header.size() : static_cast<unsigned long long>(header_len);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

// Runs f, which must throw StudyError(Data) whose message names the file and contains `reason`.
template <class F>
void expect_data_error(const std::string& path, const std::string& reason, F&& f) {
  try {
    f();
    FAIL("no error for a file that should be rejected for: " << reason);
  } catch (const study::StudyError& e) {
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(e.kind == study::ErrorKind::Data);
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find(reason) != std::string::npos);
  }
}

std::string le_bytes(std::initializer_list<unsigned> halves) {
  std::string s;
  for (unsigned h : halves) {
    s.push_back(static_cast<char>(h & 0xff));
    s.push_back(static_cast<char>(h >> 8));
  }
  return s;
}

}  // namespace

TEST_CASE("safetensors F32 round trip with metadata") {
  const std::string path = temp_path("roundtrip.safetensors");
  const std::vector<ref::NamedTensor> tensors = {
      {"a.weight", {2, 3}, {1, -2, 3.5f, 1e-30f, -0.f, 65504}},
      {"b", {}, {42}},
      {"empty", {0, 4}, {}},
      {"c", {3}, {0.1f, 0.2f, 0.3f}},
  };
  ref::write_safetensors(path, tensors, {{"format", "pt"}});
  const ref::SafetensorsFile f(path);
  CHECK(f.names() == std::vector<std::string>{"a.weight", "b", "c", "empty"});
  CHECK(f.metadata().at("format") == "pt");
  for (const auto& t : tensors) {
    CHECK(f.info(t.name).dtype == "F32");
    CHECK(f.info(t.name).shape == t.shape);
    CHECK(f.floats(t.name, t.shape) == t.data);
  }
  std::remove(path.c_str());
}

TEST_CASE("safetensors F16, BF16 and F64 convert to float") {
  const std::string path = temp_path("halves.safetensors");
  // F16: 1, -2.5, 2^-24 (smallest subnormal), 65504 (largest finite), -0, +inf.
  const std::string f16 = le_bytes({0x3C00, 0xC100, 0x0001, 0x7BFF, 0x8000, 0x7C00});
  // BF16: 1, -2.5, 3.140625.
  const std::string bf16 = le_bytes({0x3F80, 0xC020, 0x4049});
  const double third = 1.0 / 3.0;
  std::string f64(8, '\0');
  std::memcpy(&f64[0], &third, 8);  // little-endian host assumed by this test only
  write_raw(path,
            R"({"h":{"dtype":"F16","shape":[6],"data_offsets":[0,12]},)"
            R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]},)"
            R"("pad":{"dtype":"U8","shape":[6],"data_offsets":[18,24]},)"
            R"("d":{"dtype":"F64","shape":[1,1],"data_offsets":[24,32]}})",
            f16 + bf16 + std::string(6, '\0') + f64);
  const ref::SafetensorsFile f(path);
  const auto h = f.floats("h", {6});
  CHECK(h[0] == 1.f);
  CHECK(h[1] == -2.5f);
  CHECK(h[2] == std::ldexp(1.f, -24));
  CHECK(h[3] == 65504.f);
  CHECK((h[4] == 0.f && std::signbit(h[4])));
  CHECK(std::isinf(h[5]));
  CHECK(f.floats("b", {3}) == std::vector<float>{1.f, -2.5f, 3.140625f});
  CHECK(f.floats("d", {1, 1})[0] == static_cast<float>(third));
  expect_data_error(path, "only F32, F16, BF16 and F64", [&] { f.floats("pad"); });
  std::remove(path.c_str());
}

TEST_CASE("malformed safetensors files are Data errors with a reason") {
  const std::string path = temp_path("bad.safetensors");
  const std::string good = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string data(16, '\0');
  auto open = [&] { ref::SafetensorsFile f(path); };

  SUBCASE("missing file") {
    std::remove(path.c_str());
    expect_data_error(path, "cannot open", open);
  }
  SUBCASE("shorter than the length field") {
    std::ofstream(path, std::ios::binary) << "abc";
    expect_data_error(path, "too short", open);
  }
  SUBCASE("header length beyond the file") {
    write_raw(path, good, data, 1000);
    expect_data_error(path, "header length 1000 exceeds", open);
  }
  SUBCASE("truncated data section") {
    write_raw(path, good, data.substr(0, 10));
    expect_data_error(path, "run past the end", open);
  }
  SUBCASE("bad JSON") {
    write_raw(path, R"({"a": {"dtype": "F32", )", data);
    expect_data_error(path, "not valid JSON", open);
  }
  SUBCASE("JSON that is not an object") {
    write_raw(path, "[1, 2]", data);
    expect_data_error(path, "not an object", open);
  }
  SUBCASE("offsets out of range") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]}})", data);
    expect_data_error(path, "run past the end", open);
  }
  SUBCASE("offsets reversed") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data);
    expect_data_error(path, "begin after they end", open);
  }
  SUBCASE("negative offset") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[-4,12]}})", data);
    expect_data_error(path, "not non-negative integers", open);
  }
  SUBCASE("offsets that disagree with dtype and shape") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "needs 12", open);
  }
  SUBCASE("wrong dtype string") {
    write_raw(path, R"({"a":{"dtype":"float32","shape":[2,2],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "unknown dtype 'float32'", open);
  }
  SUBCASE("missing dtype") {
    write_raw(path, R"({"a":{"shape":[2,2],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "dtype missing", open);
  }
  SUBCASE("bad shape entry") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "not a non-negative integer", open);
  }
  SUBCASE("huge shape") {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "more bytes than the file has", open);
  }
  SUBCASE("overlapping tensors") {
    write_raw(path,
              R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
              data);
    expect_data_error(path, "overlaps", open);
  }
  SUBCASE("unused bytes after the last tensor") {
    write_raw(path, good, data + "xxxx");
    expect_data_error(path, "4 bytes after the last tensor", open);
  }
  SUBCASE("metadata that is not strings") {
    write_raw(path, R"({"__metadata__":{"n":1},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", data);
    expect_data_error(path, "is not a string", open);
  }
  SUBCASE("missing tensor and shape mismatch") {
    write_raw(path, good, data);
    const ref::SafetensorsFile f(path);
    expect_data_error(path, "missing tensor 'b'", [&] { f.floats("b"); });
    expect_data_error(path, "has shape [2, 2], expected [4]", [&] { f.floats("a", {4}); });
    CHECK(f.floats("a", {2, 2}) == std::vector<float>(4, 0.f));
  }
  std::remove(path.c_str());
}
