// One model's forwards on one GPU (session.hpp).
#include "encoder/session.hpp"
#include <algorithm>
#include <cstdint>
#include <utility>
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"
#include "harness/test_hooks.hpp"

namespace encoder {

namespace {

// The session's device selected for a call, the caller's selected again when it returns.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (cudaGetDevice(&callers_) != cudaSuccess) callers_ = -1;
    study::require_gpu(device);
  }
  ~OnDevice() {
    if (callers_ >= 0 && !study::planted("session_device_not_restored")) cudaSetDevice(callers_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int callers_ = -1;
};

// dst = src, n halves: 16-byte vectors where both pointers allow, else halves. The call graph's
// copies are this kernel, not memcpy nodes: a kernel node's pointers can be re-pointed at any
// device memory, where a memcpy node refuses memory of another kind than it was captured with
// (a stream-ordered pool's against torch's cudaMalloc'd tensors).
__global__ void copy_halves_kernel(const __half* __restrict__ src, __half* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  long long tail = 0;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15) == 0) {
    const long long vectors = n / 8;
    for (long long i = t; i < vectors; i += stride)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    tail = vectors * 8;
  }
  for (long long i = tail + t; i < n; i += stride) dst[i] = src[i];
}

// One copy of a call: its kernel node (once captured) and its operands.
struct Copy {
  cudaGraphNode_t node = nullptr;
  cudaKernelNodeParams params{};  // as captured: the kernel, its grid and block
  const __half* src = nullptr;
  __half* dst = nullptr;
  long long n = 0;

  void enqueue(cudaStream_t s) const {
    const long long blocks = std::min<long long>((n / 8 + 255) / 256 + 1, 1024);
    copy_halves_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(src, dst, n);
    LAUNCH_CHECK();
  }
  // Enqueued into a capture on `s`: the node it became (the capture's only dependency then) and
  // its parameters kept, for point().
  void capture(cudaStream_t s) {
    enqueue(s);
    cudaStreamCaptureStatus status{};
    const cudaGraphNode_t* last = nullptr;
    std::size_t count = 0;
    CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &last, nullptr, &count));
    if (status != cudaStreamCaptureStatusActive || count != 1)
      throw study::StudyError(study::ErrorKind::Cuda, "a call graph's copy was not captured as one node");
    node = last[0];
    CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
  }
  // The node re-pointed at src and dst (a parameter update of the instantiated graph).
  void point(cudaGraphExec_t exec, const __half* to_src, __half* to_dst) {
    src = to_src;
    dst = to_dst;
    void* args[] = {&src, &dst, &n};
    cudaKernelNodeParams p = params;
    p.kernelParams = args;
    p.extra = nullptr;
    CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  }
};

}  // namespace

// One call of a forward captured: the caller's images copied in, the forward, its features
// gathered, and two copies out (the logits, the features) of which a call enables the one it
// returns. One executable per forward: calls on two streams are ordered by CUDA, so they never
// share the forward's buffers at once.
struct Session::Slot {
  int batch = 0, image_size = 0;
  std::unique_ptr<Forward> forward;
  study::DeviceBuffer<__half> images, logits, features, parking;  // parking: the disabled copy's target
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Copy in, out[2];  // out by Output
  int enabled = -1;  // the Output whose copy is enabled
  std::vector<cudaGraphExec_t> planted_execs;  // test-hook builds: session_graph_per_output's

  ~Slot() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);  // kept while exec lives: the copies' nodes are its
  }
  std::size_t bytes() const {
    return forward->activation_bytes() + images.bytes() + logits.bytes() + features.bytes() + parking.bytes();
  }
  const study::DeviceBuffer<__half>& result(Output what) const { return what == Output::Logits ? logits : features; }

  Copy copy_in(const __half* src) const { return {nullptr, {}, src, images.get(), static_cast<long long>(images.size())}; }
  Copy copy_out(Output what, __half* dst) const {
    const auto& from = result(what);
    return {nullptr, {}, from.get(), dst, static_cast<long long>(from.size())};
  }

  // Eagerly: the copy in, the forward kernel by kernel, the requested output copied out.
  void enqueue(const __half* src, __half* dst, Output what, cudaStream_t s) const {
    copy_in(src).enqueue(s);
    forward->run_eager(images.get(), logits.get(), s);
    if (what == Output::Features) forward->copy_features(features.get(), s);
    copy_out(what, dst).enqueue(s);
  }

  void capture(const __half* src, __half* dst, Output what) {
    in = copy_in(src);
    for (Output o : {Output::Logits, Output::Features}) out[static_cast<int>(o)] = copy_out(o, o == what ? dst : parking.get());
    cudaStream_t cs = nullptr;  // the caller's stream may be the legacy default, which cannot capture
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    try {
      graph = study::capture_graph(cs, [&](cudaStream_t s) {
        in.capture(s);
        forward->run_eager(images.get(), logits.get(), s);
        forward->copy_features(features.get(), s);
        for (Copy& c : out) c.capture(s);
      });
    } catch (...) {
      cudaStreamDestroy(cs);
      throw;
    }
    cudaStreamDestroy(cs);
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    enabled = -1;
  }

  // The copies re-pointed at this call's tensors and the other output's copy disabled: parameter
  // updates of the instantiated graph, none when nothing changed.
  void launch(const __half* src, __half* dst, Output what, cudaStream_t s) {
    if (study::planted("session_graph_per_output") && enabled >= 0 && enabled != static_cast<int>(what)) {
      planted_execs.push_back(exec);  // kept (and leaked): a new executable, never the old one's address
      exec = nullptr;
      cudaGraphDestroy(graph);
      graph = nullptr;
      capture(src, dst, what);
    }
    if (src != in.src) in.point(exec, src, in.dst);
    Copy& c = out[static_cast<int>(what)];
    if (dst != c.dst) c.point(exec, c.src, dst);
    if (enabled != static_cast<int>(what)) {
      CUDA_CHECK(cudaGraphNodeSetEnabled(exec, c.node, 1));
      CUDA_CHECK(cudaGraphNodeSetEnabled(exec, out[1 - static_cast<int>(what)].node, 0));
      enabled = static_cast<int>(what);
    }
    CUDA_CHECK(cudaGraphLaunch(exec, s));
  }
};

Session::Session(const ref::VitWeights& weights, const study::ModelConfig& model, int image_size,
                 const Composition& c, int device)
    : composition_(c),
      model_(model),
      num_classes_(static_cast<int>(weights.head_b.size())),
      device_(device),
      base_image_size_(image_size) {
  if (const auto why = check_problem(problem(1, image_size)); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, why);
  const OnDevice on(device_);
  if (const auto why = why_unavailable(composition_); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, "composition " + composition_.to_string() + " cannot run here: " + why);
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  budget_ = total / 4;
  sizes_[image_size].weights = std::make_unique<DeviceWeights>(weights);
}

Session::~Session() = default;

Problem Session::problem(int batch, int image_size) const {
  Problem p;
  p.model = model_;
  p.batch = batch;
  p.image_size = image_size;
  p.num_classes = num_classes_;
  return p;
}

void Session::add_image_size(int image_size, const std::vector<float>& pos_embed) {
  const Problem p = problem(1, image_size);
  if (const auto why = check_problem(p); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
  if (image_size == base_image_size_)
    throw study::StudyError(study::ErrorKind::Usage, std::to_string(image_size) + " px is the weights' own image size");
  const std::size_t want = static_cast<std::size_t>(p.tokens()) * model_.hidden;
  if (pos_embed.size() != want)
    throw study::StudyError(study::ErrorKind::Data, "the position embedding for " + std::to_string(image_size) +
                                                        " px has " + std::to_string(pos_embed.size()) + " values, not " +
                                                        std::to_string(want) + " (" + std::to_string(p.tokens()) +
                                                        " tokens x " + std::to_string(model_.hidden) + ")");
  const OnDevice on(device_);
  auto w = std::make_unique<DeviceWeights>(sizes_.at(base_image_size_).weights->at_image_size(pos_embed));
  slots_.remove_if([&](const std::unique_ptr<Slot>& s) { return s->image_size == image_size; });
  sizes_[image_size].weights = std::move(w);
}

bool Session::has_image_size(int image_size) const { return sizes_.count(image_size) > 0; }

Session::Size& Session::size_for(int image_size) {
  const auto it = sizes_.find(image_size);
  if (it == sizes_.end())
    throw study::StudyError(study::ErrorKind::Usage, "no position embedding for " + std::to_string(image_size) +
                                                         " px images: add_image_size first");
  return it->second;
}

void Session::calibrate(int image_size, const __half* images, int batch, cudaStream_t stream) {
  const OnDevice on(device_);
  Size& size = size_for(image_size);
  const Problem p = problem(batch, image_size);
  if (const auto why = check_problem(p); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
  slots_.remove_if([&](const std::unique_ptr<Slot>& s) { return s->image_size == image_size; });
  calibrate_fp8(p, *size.weights, images, stream);
}

Session::Slot& Session::slot_for(int batch, int image_size) {
  for (auto it = slots_.begin(); it != slots_.end(); ++it)
    if ((*it)->batch == batch && (*it)->image_size == image_size) {
      slots_.splice(slots_.begin(), slots_, it);
      return *slots_.front();
    }
  const Problem p = problem(batch, image_size);
  if (const auto why = check_problem(p); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
  const DeviceWeights& w = *size_for(image_size).weights;
  if (composition_.fp8() && w.fp8_calibration.amax.empty())
    throw study::StudyError(study::ErrorKind::Usage, "composition " + composition_.to_string() + " is FP8: calibrate it at " +
                                                         std::to_string(image_size) + " px first");
  auto make = [&] {
    auto s = std::make_unique<Slot>();
    s->batch = batch;
    s->image_size = image_size;
    s->forward = std::make_unique<Forward>(p, composition_, w);
    const std::size_t pixels = static_cast<std::size_t>(batch) * study::kChannels * image_size * image_size;
    s->images = study::DeviceBuffer<__half>(pixels);
    s->logits = study::DeviceBuffer<__half>(static_cast<std::size_t>(batch) * num_classes_);
    s->features = study::DeviceBuffer<__half>(static_cast<std::size_t>(batch) * model_.hidden);
    s->parking = study::DeviceBuffer<__half>(static_cast<std::size_t>(batch) * std::max(num_classes_, model_.hidden));
    return s;
  };
  std::unique_ptr<Slot> slot;
  try {
    slot = make();
  } catch (const study::StudyError& e) {
    if (e.kind != study::ErrorKind::OutOfMemory || slots_.empty()) throw;
    slots_.clear();  // the kept forwards give their memory back, and the new one is tried once more
    slot = make();
  }
  slots_.push_front(std::move(slot));
  trim(slots_.front().get());
  return *slots_.front();
}

void Session::trim(const Slot* keep) {
  while (held_bytes() > budget_) {
    auto victim = std::find_if(slots_.rbegin(), slots_.rend(), [&](const auto& s) { return s.get() != keep; });
    if (victim == slots_.rend()) return;  // only the forward in use is left
    slots_.erase(std::next(victim).base());
  }
}

Forward& Session::forward(int batch, int image_size) {
  const OnDevice on(device_);
  return *slot_for(batch, image_size).forward;
}

void Session::call(const __half* images, __half* out, int batch, int image_size, Output what, cudaStream_t stream) {
  const OnDevice on(device_);
  if (study::planted("session_legacy_stream")) stream = nullptr;
  Slot& slot = slot_for(batch, image_size);
  if (slot.exec) {
    slot.launch(images, out, what, stream);
    return;
  }
  // The first call eagerly (plans and GEMM searches happen outside a capture), then its graph,
  // unless the composition runs without one.
  slot.enqueue(images, out, what, stream);
  if (composition_.graph && slot.forward->capturable()) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    slot.capture(images, out, what);
  }
}

const void* Session::call_graph(int batch, int image_size) const {
  for (const auto& s : slots_)
    if (s->batch == batch && s->image_size == image_size) return s->exec;
  return nullptr;
}

void Session::run_unbound(int batch, int image_size, cudaStream_t stream) {
  const OnDevice on(device_);
  Slot& slot = slot_for(batch, image_size);
  slot.forward->run(slot.images.get(), slot.logits.get(), stream);
}

void Session::set_budget_bytes(std::size_t bytes) {
  budget_ = bytes;
  const OnDevice on(device_);
  trim(nullptr);
}

std::size_t Session::held_bytes() const {
  std::size_t total = 0;
  for (const auto& s : slots_) total += s->bytes();
  return total;
}

void Session::release_forwards() {
  const OnDevice on(device_);
  slots_.clear();
}

std::size_t Session::weight_bytes() const {
  const std::size_t shared = sizes_.at(base_image_size_).weights->bytes();  // the packed buffer
  std::size_t total = shared;
  for (const auto& kv : sizes_)
    if (kv.first != base_image_size_) total += kv.second.weights->bytes() - shared;  // a position embedding
  return total;
}

}  // namespace encoder
