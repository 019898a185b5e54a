#include "harness/buffer.hpp"
#include <atomic>

namespace study {
namespace {
std::atomic<std::ptrdiff_t> g_device{0};
std::atomic<std::ptrdiff_t> g_host{0};
}  // namespace
std::size_t device_bytes_in_use() { return static_cast<std::size_t>(g_device.load()); }
std::size_t host_bytes_in_use() { return static_cast<std::size_t>(g_host.load()); }
void count_device_bytes(std::ptrdiff_t d) { g_device += d; }
void count_host_bytes(std::ptrdiff_t d) { g_host += d; }
}  // namespace study
