// NVML, the driver's management library: clocks, the power limit and the energy counter of a
// CUDA device. It comes with the driver, not the toolkit, so it is opened at run time: the study
// builds and runs where it is absent, and every call here then answers "unknown" (nullopt).
#pragma once
#include <optional>

namespace study::nvml {

std::optional<unsigned> sm_clock_mhz(int cuda_device);
std::optional<unsigned> mem_clock_mhz(int cuda_device);
std::optional<unsigned> power_limit_mw(int cuda_device);  // the enforced limit
// The device's total energy since the driver loaded, millijoules
// (nvmlDeviceGetTotalEnergyConsumption: the sensor nvidia-smi reads; Volta and newer).
std::optional<unsigned long long> total_energy_mj(int cuda_device);

}  // namespace study::nvml
