// Out of memory never kills a bench: before it builds any input, a bench estimates the device
// and host bytes its problem needs (each family's memory_need()) and refuses with one line,
// exit code 3 and a `skipped` row when they do not fit in what is free, instead of being
// killed by the host's OOM killer halfway through building its inputs.
#pragma once
#include <string>

namespace study {

// Bytes a bench holds at its peak. Doubles: an estimate, and free of overflow at any shape.
struct MemoryNeed {
  double device = 0;  // inputs, outputs, scratch, library workspaces, the GPU reference's
  double host = 0;    // fp32 inputs, their fp16 staging copies, output and reference copies
};

// Bytes free now; negative where unknown (that side is then not checked).
struct FreeMemory {
  double device = -1;
  double host = -1;
};

// Kept free beyond every estimate, for what estimates leave out: the CUDA context's growth,
// cuBLASLt / cuDNN handles and plans, allocator rounding, small host vectors.
constexpr double kDeviceReserveBytes = 256.0 * (1 << 20);
constexpr double kHostReserveBytes = 256.0 * (1 << 20);

// One line saying what `what` needs and what is free, on the first side that does not fit
// (need + reserve > free); empty when both fit.
std::string memory_refusal(const MemoryNeed& need, const FreeMemory& free, const std::string& what);

// "12.3 GiB (13207024435 bytes)": bytes as the refusal line writes them.
std::string format_bytes(double bytes);

// MemAvailable of a /proc/meminfo text, in bytes; negative when the line is absent.
double parse_mem_available(const std::string& meminfo);
// Room left under a cgroup v2 memory limit: memory.max minus memory.current, from the two
// files' text; negative when there is no limit ("max") or the text is not a number.
double cgroup_room(const std::string& max_text, const std::string& current_text);

// Host memory this process can still take: MemAvailable, lowered to the room under the
// process's cgroup v2 memory limit where one is set (Slurm jobs, containers); negative when
// unreadable.
double host_available_bytes();
// cudaMemGetInfo's free bytes on the current device.
double device_free_bytes();

// Throws StudyError(OutOfMemory) with memory_refusal's line when `need` does not fit in the
// memory free now; device memory is read on the current device, so call it after require_gpu.
void require_memory(const MemoryNeed& need, const std::string& what);

}  // namespace study
