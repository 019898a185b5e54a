#include "harness/memory.hpp"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include "harness/check.hpp"

namespace study {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A whole non-negative integer (surrounding white space allowed); negative otherwise.
double parse_count(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const unsigned long long v = std::strtoull(begin, &end, 10);
  if (end == begin || text.find('-') != std::string::npos) return -1;
  for (const char* c = end; *c; ++c)
    if (*c != ' ' && *c != '\n' && *c != '\t') return -1;
  return static_cast<double>(v);
}

// The room under this process's cgroup v2 memory limit; negative when none is set.
double cgroup_room_of_self() {
  std::istringstream groups(read_text("/proc/self/cgroup"));
  for (std::string line; std::getline(groups, line);) {
    if (line.rfind("0::", 0) != 0) continue;  // cgroup v2's unified hierarchy
    std::string dir = "/sys/fs/cgroup" + line.substr(3);
    if (!dir.empty() && dir.back() == '/') dir.pop_back();
    return cgroup_room(read_text(dir + "/memory.max"), read_text(dir + "/memory.current"));
  }
  return -1;
}

}  // namespace

std::string format_bytes(double bytes) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%.1f GiB (%.0f bytes)", bytes / (1024.0 * 1024.0 * 1024.0), bytes);
  return buf;
}

std::string memory_refusal(const MemoryNeed& need, const FreeMemory& free, const std::string& what) {
  const struct {
    const char* name;
    double need, free, reserve;
  } sides[] = {{"host", need.host, free.host, kHostReserveBytes},
               {"device", need.device, free.device, kDeviceReserveBytes}};
  for (const auto& s : sides) {
    if (s.free < 0 || s.need + s.reserve <= s.free) continue;
    return "out of " + std::string(s.name) + " memory: " + what + " needs " + format_bytes(s.need) + " of " +
           s.name + " memory, " + format_bytes(s.free) + " free (" + format_bytes(s.reserve) +
           " kept in reserve); not run";
  }
  return {};
}

double parse_mem_available(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double kib = -1;
    std::string unit;
    if (!(fields >> kib) || kib < 0) return -1;
    fields >> unit;
    return unit == "kB" || unit.empty() ? kib * 1024.0 : -1;
  }
  return -1;
}

double cgroup_room(const std::string& max_text, const std::string& current_text) {
  const double max = parse_count(max_text), current = parse_count(current_text);
  if (max < 0 || current < 0) return -1;  // "max" (no limit) or unreadable
  return max > current ? max - current : 0;
}

double host_available_bytes() {
  const double available = parse_mem_available(read_text("/proc/meminfo"));
  const double room = cgroup_room_of_self();
  if (available < 0) return room;
  return room >= 0 && room < available ? room : available;
}

double device_free_bytes() {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<double>(free);
}

void require_memory(const MemoryNeed& need, const std::string& what) {
  FreeMemory free;
  free.host = host_available_bytes();
  free.device = device_free_bytes();
  if (auto why = memory_refusal(need, free, what); !why.empty()) throw StudyError(ErrorKind::OutOfMemory, why);
}

}  // namespace study
