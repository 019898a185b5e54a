// The compiled half of the Python module (vitstudy._engine): one of the encoder's steps run on the
// weights a caller holds, on device pointers and the caller's stream. The Python half
// (vitstudy/model.py) checks and converts tensors; this file owns the weights on the device and
// one Forward per batch size with its own input and output buffers. A call is one CUDA graph: the
// caller's images copied in, the forward, its logits (or features) copied out; the copies' nodes
// are re-pointed at each call's tensors, so a new tensor costs a parameter update, not a capture.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "encoder/steps.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"
#include "reference.hpp"

namespace py = pybind11;

namespace study {
extern const char* const kBuildCommit;  // meson's vcs_tag (common/harness/build_info.cpp.in)
}  // namespace study

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

// A state dict the caller holds, as float32 arrays by timm's names (model.py converts it).
struct ArraySource : ref::TensorSource {
  std::map<std::string, FloatArray> arrays;
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& kv : arrays) out.push_back(kv.first);
    return out;
  }
  std::optional<std::vector<std::int64_t>> shape(const std::string& name) const override {
    const auto it = arrays.find(name);
    if (it == arrays.end()) return std::nullopt;
    return std::vector<std::int64_t>(it->second.shape(), it->second.shape() + it->second.ndim());
  }
  std::vector<float> floats(const std::string& name) const override {
    const FloatArray& a = arrays.at(name);
    return std::vector<float>(a.data(), a.data() + a.size());
  }
  std::string where() const override { return "the state dict"; }
};

// The caller's current device, selected again when a call returns: each call selects the engine's
// device (study::require_gpu), and the caller's code after it must find its own.
class CallersDevice {
 public:
  CallersDevice() {
    if (cudaGetDevice(&device_) != cudaSuccess) device_ = -1;
  }
  ~CallersDevice() {
    if (device_ >= 0) cudaSetDevice(device_);
  }
  CallersDevice(const CallersDevice&) = delete;
  CallersDevice& operator=(const CallersDevice&) = delete;

 private:
  int device_ = -1;
};

// The study's name of a model of these sizes, or "custom".
study::ModelConfig model_config(int hidden, int heads, int layers) {
  for (const auto& m : study::models())
    if (m.hidden == hidden && m.heads == heads && m.layers == layers) return m;
  return {"custom", hidden, heads, layers};
}

class Engine {
 public:
  // The forward of `step` (a step or alias of stages/encoder/steps.cpp) for images of
  // `image_size` on `device`, with `weights` (their pos_embed already at that size).
  Engine(const ref::TensorSource& weights, int hidden, int heads, int layers, int image_size, int num_classes,
         const std::string& step, int device)
      : step_(encoder::resolve_alias(step)), composition_(encoder::find_step(step)), device_(device) {
    problem_.model = model_config(hidden, heads, layers);
    problem_.batch = 1;
    problem_.image_size = image_size;
    problem_.num_classes = num_classes;
    if (const auto why = encoder::check_problem(problem_); !why.empty())
      throw study::StudyError(study::ErrorKind::Usage, why);
    // The weights are read (and refused) before the GPU is asked for: a malformed state dict is
    // the caller's error on any machine.
    const ref::VitWeights host = ref::vit_weights_from(weights, problem_.model, image_size, num_classes);
    const CallersDevice keep;
    study::require_gpu(device_);
    if (const auto why = encoder::why_unavailable(composition_); !why.empty())
      throw study::StudyError(study::ErrorKind::Usage, "step " + step_ + " cannot run here: " + why);
    weights_ = std::make_unique<encoder::DeviceWeights>(host);
  }

  // FP8 steps: the activation scales, from `batch` images at `images` (device, fp16
  // [batch, 3, S, S]) through an fp16 forward on `stream` (after the work that wrote them);
  // required once before the first run.
  void calibrate(std::uintptr_t images, int batch, std::uintptr_t stream) {
    const CallersDevice keep;
    study::require_gpu(device_);
    encoder::Problem p = problem_;
    p.batch = batch;
    encoder::calibrate_fp8(p, *weights_, reinterpret_cast<const __half*>(images),
                           reinterpret_cast<cudaStream_t>(stream));
    forwards_.clear();  // a forward made before reads the scales it was made with
  }

  // What a call returns: the logits [batch, classes], or the pre-logits features [batch, hidden]
  // (the final LayerNorm's class-token rows, timm's forward_head(pre_logits=True)).
  enum Output { kLogits = 0, kFeatures = 1 };

  // out (fp16 [batch, classes] or [batch, hidden]) from images [batch, 3, S, S] (fp16), both
  // device pointers, enqueued on `stream` without a host synchronization (but the first call of a
  // batch size and output, which builds its forward and captures its graph).
  void run(std::uintptr_t images, std::uintptr_t out, int batch, std::uintptr_t stream, bool features) {
    const CallersDevice keep;
    require_ready();
    Slot& slot = slot_for(batch);
    const auto s = reinterpret_cast<cudaStream_t>(stream);
    const auto* in = reinterpret_cast<const __half*>(images);
    auto* dst = reinterpret_cast<__half*>(out);
    CallGraph& g = slot.graphs[features ? kFeatures : kLogits];
    if (g.exec) {
      g.point(in, dst);
      CUDA_CHECK(cudaGraphLaunch(g.exec, s));
      return;
    }
    // The first call eagerly (plans and GEMM searches happen outside a capture), then its graph,
    // unless the step runs without one.
    enqueue_call(slot, in, dst, features, s);
    if (composition_.graph && slot.forward->capturable()) {
      CUDA_CHECK(cudaStreamSynchronize(s));
      const auto [copy_in, copy_out] = copies(slot, in, dst, features);
      g.capture(copy_in, copy_out, [&](cudaStream_t cs) { enqueue_call(slot, in, dst, features, cs); });
    }
  }

  // The forward on the engine's own input and output buffers, as the C++ bench runs it (its own
  // graph, no copies): what the binding's cost is measured against. The buffers hold the last
  // call's images of this batch size (uninitialized before one).
  void run_unbound(int batch, std::uintptr_t stream) {
    const CallersDevice keep;
    require_ready();
    Slot& slot = slot_for(batch);
    slot.forward->run(slot.images.get(), slot.logits.get(), reinterpret_cast<cudaStream_t>(stream));
  }

  const std::string& step() const { return step_; }
  std::string composition() const { return composition_.to_string(); }
  int batches_kept() const { return static_cast<int>(forwards_.size()); }

  // The forwards kept, one per batch size, least recently used dropped beyond this many: each
  // holds its activations and up to two CUDA graphs.
  static constexpr int kMaxForwards = 8;

 private:
  void require_ready() const {
    if (composition_.fp8() && weights_->fp8_calibration.amax.empty())
      throw study::StudyError(study::ErrorKind::Usage, "step " + step_ + " is FP8: calibrate it first");
    study::require_gpu(device_);
  }

  // One call of a slot captured: the copy in, the forward, the copy out, with the two copies'
  // nodes kept to re-point them at the next call's tensors.
  struct CallGraph {
    struct Copy {
      cudaGraphNode_t node = nullptr;
      void* dst = nullptr;
      const void* src = nullptr;
      std::size_t bytes = 0;
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Copy in, out;  // in: the caller's images -> the slot's; out: the slot's output -> the caller's

    CallGraph() = default;
    CallGraph(const CallGraph&) = delete;
    CallGraph& operator=(const CallGraph&) = delete;
    CallGraph(CallGraph&& o) noexcept { swap(o); }
    CallGraph& operator=(CallGraph&& o) noexcept {
      swap(o);
      return *this;
    }
    ~CallGraph() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);  // kept while exec lives: the copies' nodes are its
    }
    void swap(CallGraph& o) noexcept {
      std::swap(graph, o.graph);
      std::swap(exec, o.exec);
      std::swap(in, o.in);
      std::swap(out, o.out);
    }

    // `enqueue(stream)` records one call whose copies are `copy_in` and `copy_out`; their nodes
    // are the memcpy nodes that read the caller's images and write the caller's output (the
    // forward's own copies touch only its buffers).
    void capture(const Copy& copy_in, const Copy& copy_out, const std::function<void(cudaStream_t)>& enqueue) {
      cudaStream_t cs = nullptr;  // the caller's stream may be the legacy default, which cannot capture
      CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
      try {
        graph = study::capture_graph(cs, enqueue);
      } catch (...) {
        cudaStreamDestroy(cs);
        throw;
      }
      cudaStreamDestroy(cs);
      in = copy_in;
      out = copy_out;
      for (cudaGraphNode_t node : study::graph_nodes(graph, cudaGraphNodeTypeMemcpy)) {
        cudaMemcpy3DParms p{};
        CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &p));
        if (p.srcPtr.ptr == in.src) in.node = node;
        if (p.dstPtr.ptr == out.dst) out.node = node;
      }
      if (!in.node || !out.node)
        throw study::StudyError(study::ErrorKind::Cuda, "the captured call has no copy of the caller's tensors");
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    }

    // The copies re-pointed at this call's tensors (a parameter update of the instantiated graph).
    void point(const void* images, void* dst) {
      if (images != in.src) {
        in.src = images;
        CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec, in.node, in.dst, in.src, in.bytes, cudaMemcpyDeviceToDevice));
      }
      if (dst != out.dst) {
        out.dst = dst;
        CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec, out.node, out.dst, out.src, out.bytes, cudaMemcpyDeviceToDevice));
      }
    }
  };

  struct Slot {
    int batch;
    std::unique_ptr<encoder::Forward> forward;
    study::DeviceBuffer<__half> images, logits, features;
    std::array<CallGraph, 2> graphs;  // by Output
  };

  // The two copies of one call of `slot`: the caller's images in, its output out.
  static std::pair<CallGraph::Copy, CallGraph::Copy> copies(const Slot& slot, const __half* images, __half* out,
                                                             bool features) {
    const auto& from = features ? slot.features : slot.logits;
    return {{nullptr, slot.images.get(), images, slot.images.bytes()}, {nullptr, out, from.get(), from.bytes()}};
  }

  static void enqueue_call(Slot& slot, const __half* images, __half* out, bool features, cudaStream_t s) {
    const auto [in, to] = copies(slot, images, out, features);
    CUDA_CHECK(cudaMemcpyAsync(in.dst, in.src, in.bytes, cudaMemcpyDeviceToDevice, s));
    slot.forward->run_eager(slot.images.get(), slot.logits.get(), s);
    if (features) slot.forward->copy_features(slot.features.get(), s);
    CUDA_CHECK(cudaMemcpyAsync(to.dst, to.src, to.bytes, cudaMemcpyDeviceToDevice, s));
  }

  Slot& slot_for(int batch) {
    for (auto it = forwards_.begin(); it != forwards_.end(); ++it)
      if (it->batch == batch) {
        forwards_.splice(forwards_.begin(), forwards_, it);
        return forwards_.front();
      }
    encoder::Problem p = problem_;
    p.batch = batch;
    if (const auto why = encoder::check_problem(p); !why.empty())
      throw study::StudyError(study::ErrorKind::Usage, why);
    if (static_cast<int>(forwards_.size()) >= kMaxForwards) forwards_.pop_back();
    const std::size_t pixels = static_cast<std::size_t>(batch) * study::kChannels * p.image_size * p.image_size;
    Slot slot{batch, std::make_unique<encoder::Forward>(p, composition_, *weights_),
              study::DeviceBuffer<__half>(pixels),
              study::DeviceBuffer<__half>(static_cast<std::size_t>(batch) * p.num_classes),
              study::DeviceBuffer<__half>(static_cast<std::size_t>(batch) * p.model.hidden),
              {}};
    forwards_.push_front(std::move(slot));
    return forwards_.front();
  }

  std::string step_;
  encoder::Composition composition_;
  int device_;
  encoder::Problem problem_;
  std::unique_ptr<encoder::DeviceWeights> weights_;
  std::list<Slot> forwards_;  // most recently used first
};

}  // namespace

PYBIND11_MODULE(_engine, m) {
  m.doc() = "The study's ViT forward on device pointers (vitstudy's compiled half; use vitstudy.Model).";
  // Usage and data errors are the caller's (ValueError); no GPU, memory, CUDA and library errors
  // are the machine's (RuntimeError, MemoryError).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const study::StudyError& e) {
      switch (e.kind) {
        case study::ErrorKind::Usage:
        case study::ErrorKind::Data: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case study::ErrorKind::OutOfMemory: PyErr_SetString(PyExc_MemoryError, e.what()); return;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    }
  });
  m.attr("build_commit") = study::kBuildCommit;  // the commit this module was built from, as bench rows name it
  m.def("gpu_count", &study::gpu_count, "CUDA devices this process sees (0 without a driver or a device).");
  m.def("steps", [] {
    std::vector<std::string> out;
    for (const auto& s : encoder::steps()) out.push_back(s.name);
    for (const auto& a : encoder::aliases()) out.push_back(a.name);
    return out;
  }, "Every step and alias of the encoder's step table.");
  py::class_<Engine>(m, "Engine")
      .def(py::init([](const std::string& path, int hidden, int heads, int layers, int image_size, int num_classes,
                       const std::string& step, int device) {
             return std::make_unique<Engine>(*ref::safetensors_source(path), hidden, heads, layers, image_size,
                                             num_classes, step, device);
           }),
           py::arg("path"), py::arg("hidden"), py::arg("heads"), py::arg("layers"), py::arg("image_size"),
           py::arg("num_classes"), py::arg("step"), py::arg("device"), "From a safetensors file.")
      .def(py::init([](std::map<std::string, FloatArray> arrays, int hidden, int heads, int layers, int image_size,
                       int num_classes, const std::string& step, int device) {
             ArraySource source;
             source.arrays = std::move(arrays);
             return std::make_unique<Engine>(source, hidden, heads, layers, image_size, num_classes, step, device);
           }),
           py::arg("arrays"), py::arg("hidden"), py::arg("heads"), py::arg("layers"), py::arg("image_size"),
           py::arg("num_classes"), py::arg("step"), py::arg("device"), "From float32 arrays by timm's names.")
      .def("calibrate", &Engine::calibrate, py::arg("images"), py::arg("batch"), py::arg("stream"))
      .def("run", &Engine::run, py::arg("images"), py::arg("out"), py::arg("batch"), py::arg("stream"),
           py::arg("features") = false)
      .def("run_unbound", &Engine::run_unbound, py::arg("batch"), py::arg("stream"))
      .def_property_readonly("step", &Engine::step)
      .def_property_readonly("composition", &Engine::composition)
      .def_property_readonly("batches_kept", &Engine::batches_kept)
      .def_property_readonly_static("max_batches_kept", [](py::object) { return Engine::kMaxForwards; });
}
