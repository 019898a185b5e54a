#include "harness/nvml.hpp"
#include <cuda_runtime.h>
#include <dlfcn.h>

namespace study::nvml {

namespace {

// Only the calls used here are declared, with NVML's C signatures.
using Device = void*;
struct Library {
  int (*get_clock)(Device, int, unsigned*) = nullptr;
  int (*get_power_limit)(Device, unsigned*) = nullptr;
  int (*get_energy)(Device, unsigned long long*) = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  bool ok = false;
  Library() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    get_clock = reinterpret_cast<decltype(get_clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    get_power_limit = reinterpret_cast<decltype(get_power_limit)>(dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit"));
    get_energy = reinterpret_cast<decltype(get_energy)>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    by_pci = reinterpret_cast<decltype(by_pci)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    ok = init && get_clock && get_power_limit && by_pci && init() == 0;
  }
  // NVML numbers devices its own way; the PCI bus id names the CUDA device unambiguously.
  bool device(int cuda_device, Device* d) const {
    char bus[32] = {0};
    if (!ok) return false;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return by_pci(bus, d) == 0;
  }
};

const Library& library() {
  static const Library n;
  return n;
}

constexpr int kClockSm = 1, kClockMem = 2;

std::optional<unsigned> clock(int cuda_device, int which) {
  Device d = nullptr;
  unsigned mhz = 0;
  if (!library().device(cuda_device, &d) || library().get_clock(d, which, &mhz) != 0) return std::nullopt;
  return mhz;
}

}  // namespace

std::optional<unsigned> sm_clock_mhz(int cuda_device) { return clock(cuda_device, kClockSm); }
std::optional<unsigned> mem_clock_mhz(int cuda_device) { return clock(cuda_device, kClockMem); }

std::optional<unsigned> power_limit_mw(int cuda_device) {
  Device d = nullptr;
  unsigned mw = 0;
  if (!library().device(cuda_device, &d) || library().get_power_limit(d, &mw) != 0) return std::nullopt;
  return mw;
}

std::optional<unsigned long long> total_energy_mj(int cuda_device) {
  Device d = nullptr;
  unsigned long long mj = 0;
  if (!library().get_energy || !library().device(cuda_device, &d) || library().get_energy(d, &mj) != 0)
    return std::nullopt;
  return mj;
}

}  // namespace study::nvml
