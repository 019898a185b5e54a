// The compiled half of the Python module (vitstudy._engine): an encoder session
// (stages/encoder/session.hpp: the weights once on the GPU, a position embedding per image size,
// the forwards kept within a memory budget, one re-pointed call graph each) on the device
// pointers and stream handles that the Python half (vitstudy/model.py) takes from torch tensors.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "encoder/session.hpp"
#include "encoder/steps.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
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

// The study's name of a model of these sizes, or "custom".
study::ModelConfig model_config(int hidden, int heads, int layers) {
  for (const auto& m : study::models())
    if (m.hidden == hidden && m.heads == heads && m.layers == layers) return m;
  return {"custom", hidden, heads, layers};
}

// A session on the weights of `source` (their pos_embed at `image_size`) for a step or alias of
// stages/encoder/steps.cpp. The weights are read (and refused) before the GPU is asked for: a
// malformed state dict is the caller's error on any machine.
std::unique_ptr<encoder::Session> open_session(const ref::TensorSource& source, int hidden, int heads, int layers,
                                               int image_size, int num_classes, const std::string& step, int device) {
  const study::ModelConfig model = model_config(hidden, heads, layers);
  encoder::Problem p;
  p.model = model;
  p.batch = 1;
  p.image_size = image_size;
  p.num_classes = num_classes;
  if (const auto why = encoder::check_problem(p); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
  const ref::VitWeights host = ref::vit_weights_from(source, model, image_size, num_classes);
  return std::make_unique<encoder::Session>(host, model, image_size, encoder::find_step(step), device);
}

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
  m.def("resolve_step", [](const std::string& step) {
    encoder::find_step(step);  // an unknown name refused
    return encoder::resolve_alias(step);
  }, py::arg("step"), "The step an alias names (a step's own name: itself).");
  // An encoder::Session (stages/encoder/session.hpp) on device pointers and stream handles, which
  // model.py takes from torch tensors and torch's current stream.
  using encoder::Session;
  py::class_<Session>(m, "Session")
      .def(py::init([](const std::string& path, int hidden, int heads, int layers, int image_size, int num_classes,
                       const std::string& step, int device) {
             return open_session(*ref::safetensors_source(path), hidden, heads, layers, image_size, num_classes, step,
                                 device);
           }),
           py::arg("path"), py::arg("hidden"), py::arg("heads"), py::arg("layers"), py::arg("image_size"),
           py::arg("num_classes"), py::arg("step"), py::arg("device"), "From a safetensors file.")
      .def(py::init([](std::map<std::string, FloatArray> arrays, int hidden, int heads, int layers, int image_size,
                       int num_classes, const std::string& step, int device) {
             ArraySource source;
             source.arrays = std::move(arrays);
             return open_session(source, hidden, heads, layers, image_size, num_classes, step, device);
           }),
           py::arg("arrays"), py::arg("hidden"), py::arg("heads"), py::arg("layers"), py::arg("image_size"),
           py::arg("num_classes"), py::arg("step"), py::arg("device"), "From float32 arrays by timm's names.")
      .def("add_image_size", [](Session& s, int image_size, const FloatArray& pos_embed) {
             s.add_image_size(image_size, std::vector<float>(pos_embed.data(), pos_embed.data() + pos_embed.size()));
           }, py::arg("image_size"), py::arg("pos_embed"))
      .def("has_image_size", &Session::has_image_size, py::arg("image_size"))
      .def("calibrate", [](Session& s, int image_size, std::uintptr_t images, int batch, std::uintptr_t stream) {
             s.calibrate(image_size, reinterpret_cast<const __half*>(images), batch, reinterpret_cast<cudaStream_t>(stream));
           }, py::arg("image_size"), py::arg("images"), py::arg("batch"), py::arg("stream"))
      .def("run", [](Session& s, std::uintptr_t images, std::uintptr_t out, int batch, int image_size,
                     std::uintptr_t stream, bool features) {
             s.call(reinterpret_cast<const __half*>(images), reinterpret_cast<__half*>(out), batch, image_size,
                    features ? Session::Output::Features : Session::Output::Logits,
                    reinterpret_cast<cudaStream_t>(stream));
           }, py::arg("images"), py::arg("out"), py::arg("batch"), py::arg("image_size"), py::arg("stream"),
           py::arg("features") = false)
      .def("run_unbound", [](Session& s, int batch, int image_size, std::uintptr_t stream) {
             s.run_unbound(batch, image_size, reinterpret_cast<cudaStream_t>(stream));
           }, py::arg("batch"), py::arg("image_size"), py::arg("stream"))
      .def_property("budget_bytes", &Session::budget_bytes, &Session::set_budget_bytes)
      .def_property_readonly("held_bytes", &Session::held_bytes)
      .def_property_readonly("weight_bytes", &Session::weight_bytes)
      .def_property_readonly("forwards_kept", &Session::forwards_kept)
      .def("release_forwards", &Session::release_forwards)
      .def_property_readonly("composition", [](const Session& s) { return s.composition().to_string(); });
}
