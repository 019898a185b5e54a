// The tile-scheduled kernel (tiled.hpp says what it computes) as a short loop over the schedule:
// take a ticket, request the task's weights, wait for its inputs, run it, signal. A GEMM task is
// a mainloop and an epilogue (tiled_mainloop.cuh, tiled_epilogue.cuh), or with tile_shape=read_once
// a slice task (tiled_read_once.cuh); the other tasks are in tiled_tasks.cuh. The form's tile_
// fields choose each piece (tiled_task.cuh's Policy), and every form that makes a kernel (tiled.hpp's
// invalid) is one instantiation of tiled_kernel.
//
// The dependency protocol is tile_device.cuh's, which the dry run (tile_dry_run.cu) tests without
// the math: thread 0 polls each counter the task waits on with acquire loads, the CTA synchronizes,
// and after the task's last store and a CTA barrier thread 0 adds one to its counter with release
// semantics. Everything a task reads that another CTA wrote goes through L2 (cp.async.cg,
// ld.global.cg): L1 is not coherent.
#include <utility>
#include "encoder/tiled.hpp"
#include "encoder/tiled_epilogue.cuh"
#include "encoder/tiled_mainloop.cuh"
#include "encoder/tiled_read_once.cuh"
#include "encoder/tiled_task.cuh"
#include "encoder/tiled_tasks.cuh"
#include "gemm/cutlass_gemm.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/test_hooks.hpp"

namespace encoder::tiled {

namespace {

// One GEMM task of kind kEpi: its mainloop, then its epilogue, the task's first weight chunks
// already requested (prefetch_w) into w_s.
template <class P, Epi kEpi>
__device__ void gemm_task(const Params& p, const GemmTask& g, __half* a_s, __half* w_s) {
  const WarpTile at;
  float acc[4][4] = {};
  Hooks<P, kEpi> hooks;
  Mainloop<P>::template run<P::kWgmma>(acc, at, p, g, a_s, w_s, hooks);
  epilogue<P, kEpi>(p, g, acc, hooks, g.m0 + at.wm, g.n0 + at.wn, at.lane);
}

// One instantiation a form that makes a kernel (tiled_task.cuh's Policy reads its fields).
// kClock: thread 0 stamps each task (Blocks::set_clock); the timed instantiations have none of it.
template <unsigned kCode, bool kClock>
__global__ void __launch_bounds__(kThreads, Policy<kCode>::kCtas) tiled_kernel(typename Policy<kCode>::Args p) {
  using P = Policy<kCode>;
  using Main = Mainloop<P>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // wgmma's descriptors need the stages 1024-byte aligned; the dynamic shared memory's start is
  // only as aligned as the static variables before it let it be (the size has 1024 bytes of slack).
  __half* smem = reinterpret_cast<__half*>(
      P::kWgmma ? smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023) : smem_raw);
  __half* a_s = smem;  // a GEMM task's A panel (streamed: its stages) and its weight stages after it
  // read_once: kSliceStages A stages, then the task's weight slice.
  __half* w_s = P::kReadOnce ? smem + kSliceStages * kTileHalves : Main::weights(smem, p.hidden);
  __shared__ int next;
  if (threadIdx.x == 0) next = static_cast<int>(atomicAdd(p.ticket, 1u));
  __syncthreads();
  int i = next;
  __syncthreads();  // every thread holds its first ticket before thread 0 takes the next into `next`
  while (i < p.n_tasks) {
    const DeviceTask t = p.tasks[i];
    const Kind kind = static_cast<Kind>(t.kind);
    std::conditional_t<P::kReadOnce, SliceTask, GemmTask> g{};
    const bool layernorm = P::kLnTasks && (kind == Kind::Ln1 || kind == Kind::Ln2);
    const bool gemm = kind != Kind::Attention && !layernorm;
    if (gemm) {
      // Weights depend on nothing: requested before the wait.
      if constexpr (P::kReadOnce) {
        g = slice_of(p, t);
        request_slice(w_s, g);
      } else {
        g = gemm_of<P>(p, t);
        prefetch_w<kBN, Main::kWeightStages>(w_s, weight_rows(g, p.hidden), p.hidden / kBK);
      }
    }
    unsigned long long started = 0;
    if (kClock && threadIdx.x == 0) started = global_ns();
    if (threadIdx.x == 0) {
      if (const unsigned timed_out = tiles::wait_inputs(t, p.counters, kWaitTimeoutNs))
        atomicAdd(p.faults, timed_out);
      if (kClock) {
        p.clock[4 * i] = started;
        p.clock[4 * i + 1] = global_ns();
      }
      // The next ticket now: its fetch overlaps this task. Holding it cannot deadlock: this
      // task's inputs exist, so it finishes, and every smaller ticket's task is held by a
      // running CTA. A read-once GEMM task takes it after its slices' meeting (tiled_read_once.cuh's
      // meet says why).
      if (!(P::kReadOnce && gemm)) next = static_cast<int>(atomicAdd(p.ticket, 1u));
    }
    __syncthreads();
    int following = next;
    if (P::kStreamed && layernorm)
      layernorm_rows(p, t);
    else if (layernorm)
      layernorm_task(p, t, a_s);
    else if (kind == Kind::Attention)
      attention_task(p, p.qkv[qkv_buffer(p, t.block)], t.row_tile, t.col, smem);
    else if constexpr (P::kReadOnce) {
      slice_task<P, kClock>(p, g, t, a_s, w_s, next, kClock ? p.meet_clock + 2 * i : nullptr);
      following = next;  // taken by thread 0 before the meeting's barrier
    }
    else if (kind == Kind::Qkv)
      gemm_task<P, Epi::Bias>(p, g, a_s, w_s);
    else if (kind == Kind::Projection)
      gemm_task<P, Epi::BiasResidual>(p, g, a_s, w_s);
    else if (kind == Kind::Fc1)
      gemm_task<P, Epi::BiasGelu>(p, g, a_s, w_s);
    else
      gemm_task<P, Epi::SplitResidual>(p, g, a_s, w_s);
    __syncthreads();  // every store of the task issued, every thread past reading `next`
    if (kClock && threadIdx.x == 0) {
      p.clock[4 * i + 2] = global_ns();
      p.clock[4 * i + 3] = sm_id();
    }
    if (threadIdx.x == 0 && i != p.drop_signal) tiles::signal(t, p.counters);
    i = following;
  }
}

std::size_t smem_bytes(const Problem& p, Form form) {
  if (!form.streamed()) return panel::smem_bytes(p.model.hidden, p.tokens(), kBN, kStages);
  // The streamed GEMM's stages (read_once: A's, then the whole weight slice), or the attention's
  // Q, keys and values (the rows form: no panel); wgmma's 1024-byte alignment from wherever the
  // dynamic shared memory starts.
  const int tiles = form.read_once() ? kSliceStages + kSliceChunks : 2 * kStreamStages;
  return std::max(sizeof(__half) * tiles * kTileHalves,
                  panel::smem_bytes(0, p.tokens(), kBN, 0)) +
         (form.wgmma() ? 1024 : 0);
}

// The kernel of a form: its entry (for its attributes) and its launch, which passes the kernel
// the parameters it takes (Policy::Args). Every code that makes a kernel is instantiated, the
// others are null.
struct Kernel {
  const void* entry = nullptr;
  void (*launch)(const ReadOnceParams&, int grid, std::size_t smem, cudaStream_t) = nullptr;
};
template <unsigned kCode, bool kClock>
void launch(const ReadOnceParams& prm, int grid, std::size_t smem, cudaStream_t s) {
  tiled_kernel<kCode, kClock><<<grid, kThreads, smem, s>>>(static_cast<const typename Policy<kCode>::Args&>(prm));
}
template <unsigned kCode>
Kernel instance(bool clock) {
  if constexpr (invalid(decode(kCode)) == nullptr) {
    if (clock) return {reinterpret_cast<const void*>(tiled_kernel<kCode, true>), launch<kCode, true>};
    return {reinterpret_cast<const void*>(tiled_kernel<kCode, false>), launch<kCode, false>};
  } else {
    return {};
  }
}
template <unsigned... kCodes>
Kernel kernel_of(unsigned code, bool clock, std::integer_sequence<unsigned, kCodes...>) {
  Kernel k;
  ((k = code == kCodes ? instance<kCodes>(clock) : k), ...);
  return k;
}
Kernel kernel_for(Form form, bool clock) {
  return kernel_of(code(form), clock, std::make_integer_sequence<unsigned, kForms>{});
}

// "blocks=tiled tile_a=streamed ...: ", the prefix of the form's refusals.
std::string step_of(Form form) {
  Composition c;
  c.blocks = encoder::Blocks::Tiled;
  const std::string s = with_form(c, form).to_string();
  return s.substr(s.find("blocks=")) + ": ";
}

constexpr std::size_t kMaxSmem = 227 * 1024;  // a Hopper CTA's (opt-in)

// A GEMM of the schedule's blocks by gemm_index: its output columns, K and K split.
struct GemmDims {
  int n, k, split;
};
GemmDims gemm_dims(const tiles::Shape& s, int i) {
  const int D = s.hidden, mlp = s.mlp_hidden;
  const GemmDims dims[kGemms] = {{3 * D, D, s.qkv_split}, {D, D, s.proj_split}, {mlp, D, s.fc1_split},
                                 {D, mlp, s.fc2_split}};
  return dims[i];
}
// The split GEMMs' fp32 partial sums: fc2's 4 slices of 64 x 64 tiles, or every GEMM's slices
// (read_once; each GEMM its own, as the next GEMM's slices may start while the last tiles of
// one are being added).
std::size_t partial_floats(const tiles::Schedule& s, Form form) {
  const std::size_t rows = static_cast<std::size_t>(s.shape.rows);
  if (!form.read_once()) return kSplit * rows * s.shape.hidden;
  std::size_t n = 0;
  for (int i = 0; i < kGemms; ++i) n += static_cast<std::size_t>(gemm_dims(s.shape, i).split) * rows * gemm_dims(s.shape, i).n;
  return n;
}
// The arrival counts of the split output tiles: fc2's 64 x 64 tiles, or (read_once) every GEMM's
// tiles of a row group, in gemm_index order.
std::size_t arrival_slots(const tiles::Schedule& s, Form form) {
  if (!form.read_once()) return static_cast<std::size_t>(s.row_tiles) * s.shape.hidden / kBN;
  std::size_t n = 0;
  for (int i = 0; i < kGemms; ++i) n += static_cast<std::size_t>(s.row_groups) * gemm_dims(s.shape, i).n / kBN;
  return n;
}

// The folded LayerNorm's QKV and fc1 a block (FoldedView): 3 + 4 hidden rows of `hidden` fp16
// weights, and each of their 7 hidden rows' sum and bias in fp32.
std::size_t folded_halves(int hidden) { return static_cast<std::size_t>(7) * hidden * hidden; }
std::size_t folded_floats(int hidden) { return static_cast<std::size_t>(14) * hidden; }
// e30's partial statistics: two buffers of (mean, M2) per row and 32 columns.
std::size_t stats_pairs(long long rows, int hidden) {
  return static_cast<std::size_t>(rows) * (hidden / row_stats::kGroup);
}
constexpr int kStateHead = 2;  // the ticket and the fault count before the counters

}  // namespace

tiles::Shape shape_of(const Problem& p, int batch, Form form) {
  if (form.read_once())
    return tiles::read_once_shape(p.model.hidden, p.model.layers, p.tokens(), batch, study::sm_count(), kSliceChunks);
  return tiles::vit_shape(p.model.hidden, p.model.layers, p.tokens(), batch, kSplit, form.ln_tasks());
}

std::string unavailable(Form form) { return form.wgmma() ? sm90::wgmma_unavailable() : std::string(); }

std::string refuses(const Problem& p, int batch, Form form) {
  if (auto why = panel::refuses_shape(p); !why.empty()) return why;
  if (smem_bytes(p, Form{}) > kMaxSmem)
    return std::to_string(p.tokens()) + " tokens: every key and value of a head must fit in shared memory (" +
           std::to_string(smem_bytes(p, Form{})) + " of " + std::to_string(kMaxSmem) + " bytes)";
  if (static_cast<long long>(batch) * p.tokens() * kMlpRatio * p.model.hidden >= (1LL << 31))
    return "the batch overflows 32-bit indexing";
  return {};
}

std::size_t Blocks::scratch_bytes(const Problem& p, int batch, Form form) {
  const tiles::Schedule s = tiles::build(shape_of(p, batch, form));
  const long long rows = static_cast<long long>(batch) * p.tokens();
  return sizeof(float) * partial_floats(s, form) + sizeof(__half) * rows * (form.ln_tasks() ? 4 : 3) * p.model.hidden +
         sizeof(unsigned) * (kStateHead + s.final_counts.size() + arrival_slots(s, form)) +
         sizeof(DeviceTask) * s.tasks.size() +
         sizeof(BlockView) * p.model.layers +
         (form.folded_ln() ? (sizeof(__half) * folded_halves(p.model.hidden) +
                             sizeof(float) * folded_floats(p.model.hidden) + sizeof(FoldedView)) *
                                p.model.layers
                          : 0) +
         (form.row_stats() ? 2 * sizeof(float2) * stats_pairs(rows, p.model.hidden) : 0);
}

Blocks::Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks, Form form)
    : p_(p), rows_(batch * p.tokens()), form_(form), smem_(smem_bytes(p, form)) {
  const std::string who = step_of(form);
  if (const char* why = invalid(form)) throw study::StudyError(study::ErrorKind::Usage, who + why);
  if (auto why = refuses(p, batch, form); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, who + why);
  sched_ = tiles::build(shape_of(p, batch, form));
  // What is proved is the table the kernel reads, decoded entry by entry, not the schedule it was
  // made from; dependency_state() compares the table on the device with it after each forward.
  const std::vector<tiles::DeviceTask> table = tiles::device_tasks(sched_);
  const tiles::Schedule read = tiles::from_device(sched_, table);
  const bool prove_order = read.tasks.size() <= tiles::kOrderProofMaxTasks;
  if (auto why = prove_order ? tiles::check(read) : tiles::check_counts(read); !why.empty())
    throw std::logic_error(who + "the tile schedule is unsound: " + why);
  for (bool clock : {false, true})
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(form, clock).entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem_)));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(form, false).entry, kThreads, smem_));
  if (per_sm < 1)
    throw study::StudyError(study::ErrorKind::Usage, who + "a CTA with " + std::to_string(smem_) +
                                                         " bytes of shared memory does not fit on an SM");
  // One CTA an SM; two where the form is built for it and they fit (not with the keys of 577
  // tokens in shared memory): every CTA resident, each taking tickets.
  grid_ = study::sm_count() * std::min(per_sm, form.ctas_per_sm());
  if (form.read_once())
    for (int i = 0; i < kGemms; ++i) {
      const GemmDims d = gemm_dims(sched_.shape, i);
      if (d.k / d.split / kBK > kSliceChunks) throw std::logic_error(who + "a weight slice overflows shared memory");
      if (d.split > grid_)  // tiled_read_once.cuh's meet: no deadlock with a CTA for every slice of a tile
        throw study::StudyError(study::ErrorKind::Usage, who + "a read-once tile's " + std::to_string(d.split) +
                                                             " slices meet, and need as many CTAs: " +
                                                             std::to_string(grid_) + " fit on this GPU");
    }
  tasks_ = study::to_device(table);
  layers_ = study::DeviceBuffer<BlockView>(blocks.size());
  CUDA_CHECK(cudaMemcpy(layers_.get(), blocks.data(), layers_.bytes(), cudaMemcpyHostToDevice));
  partial_ = study::DeviceBuffer<float>(partial_floats(sched_, form));
  qkv_odd_ = study::DeviceBuffer<__half>(static_cast<std::size_t>(rows_) * 3 * p.model.hidden);
  if (form.ln_tasks()) ln_ = study::DeviceBuffer<__half>(static_cast<std::size_t>(rows_) * p.model.hidden);
  state_ = study::DeviceBuffer<unsigned>(kStateHead + sched_.final_counts.size() + arrival_slots(sched_, form));
  CUDA_CHECK(cudaMemset(state_.get(), 0, state_.bytes()));
  if (form.folded_ln()) fold(blocks);
  if (form.row_stats())
    for (auto& b : stats_) b = study::DeviceBuffer<float2>(stats_pairs(rows_, p.model.hidden));
  CUDA_CHECK(cudaDeviceSynchronize());
}

void Blocks::fold(const std::vector<BlockView>& blocks) {
  const int D = p_.model.hidden;
  const std::size_t halves = folded_halves(D), floats = folded_floats(D), qkv = static_cast<std::size_t>(3) * D * D;
  folded_w_ = study::DeviceBuffer<__half>(blocks.size() * halves);
  folded_cols_ = study::DeviceBuffer<float>(blocks.size() * floats);
  std::vector<FoldedView> views;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const BlockView& b = blocks[i];
    __half* w = folded_w_.get() + i * halves;
    float* c = folded_cols_.get() + i * floats;  // QKV's sums and biases (3 hidden each), then fc1's (4 hidden)
    study::cutlass_gemm::fold_layernorm(b.qkv_w, b.qkv_b, b.ln1_g, b.ln1_b, 3 * D, D, w, c, c + 3 * D, nullptr);
    study::cutlass_gemm::fold_layernorm(b.fc1_w, b.fc1_b, b.ln2_g, b.ln2_b, 4 * D, D, w + qkv, c + 6 * D, c + 10 * D,
                                        nullptr);
    views.push_back({w, w + qkv, c, c + 3 * D, c + 6 * D, c + 10 * D});
  }
  folded_ = study::to_device(views);
}

void Blocks::poison_scratch() {
  study::poison(partial_);
  study::poison(qkv_odd_);
  if (form_.ln_tasks()) study::poison(ln_);
  if (form_.row_stats())
    for (auto& b : stats_) study::poison(b);
}

void Blocks::run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const {
  // The ticket, the fault count and the counters start from 0, and read_once's arrivals; fc2's
  // arrivals in the 64 x 64 tiling return to 0 by themselves (a memset node in a graph: ~1 us, no
  // kernel).
  CUDA_CHECK(cudaMemsetAsync(
      state_.get(), 0,
      form_.read_once() ? state_.bytes() : sizeof(unsigned) * (kStateHead + sched_.final_counts.size()), s));
  ReadOnceParams prm{};
  prm.tasks = tasks_.get();
  prm.n_tasks = static_cast<int>(sched_.tasks.size());
  set_forward(prm, p_, layers_.get(), rows_, x, attn, h);
  prm.qkv[0] = qkv;
  prm.qkv[1] = qkv_odd_.get();
  prm.ln = form_.ln_tasks() ? ln_.get() : nullptr;
  prm.partial = partial_.get();
  unsigned* st = state_.get();
  prm.ticket = st;
  prm.faults = st + 1;
  prm.counters = st + kStateHead;
  prm.arrivals = prm.counters + sched_.final_counts.size();
  prm.drop_signal = -1;
#ifdef STUDY_TEST_HOOKS
  prm.planted_short_stats = study::planted("folded_stats_short");
  prm.planted_short_groups = study::planted("row_stats_short");
#endif
  if (study::planted("tiled_signal_dropped")) {  // fc1 of block 0, rows 0, column 0 never signals
    for (std::size_t i = 0; i < sched_.tasks.size(); ++i)
      if (sched_.tasks[i].kind == Kind::Fc1) {
        prm.drop_signal = static_cast<int>(i);
        break;
      }
  }
  // Not a cooperative launch: a CTA waits only on tasks of smaller tickets, all held by CTAs
  // already running, so the forward completes whichever CTAs are resident.
  prm.clock = clock_ ? clock_stamps_.get() : nullptr;
  prm.meet_clock = clock_ && form_.read_once() ? clock_stamps_.get() + 4 * sched_.tasks.size() : nullptr;
  prm.folded = folded_.get();
  prm.stats[0] = stats_[0].get();
  prm.stats[1] = stats_[1].get();
  if (form_.read_once()) {
    float* partial = partial_.get();
    unsigned* arrivals = prm.arrivals;
    for (int i = 0; i < kGemms; ++i) {
      const GemmDims d = gemm_dims(sched_.shape, i);
      prm.split[i] = d.split;
      prm.partials[i] = partial;
      prm.slice_arrivals[i] = arrivals;
      partial += static_cast<std::size_t>(d.split) * rows_ * d.n;
      arrivals += static_cast<std::size_t>(sched_.row_groups) * d.n / kBN;
    }
#ifdef STUDY_TEST_HOOKS
    prm.planted_slice_dropped = study::planted("read_once_slice_dropped");
    prm.planted_no_meeting = study::planted("read_once_no_meeting");
#endif
    // Block 0's QKV combines its rows' statistics as every later block's does: from stats[1].
    if (!study::planted("read_once_first_stats_skipped")) {
      const int threads = 256, pairs = static_cast<int>(stats_pairs(rows_, p_.model.hidden));
      first_row_stats<<<(pairs + threads - 1) / threads, threads, 0, s>>>(x, rows_, p_.model.hidden, stats_[1].get());
      CUDA_CHECK(cudaGetLastError());
    }
  }
  kernel_for(form_, clock_).launch(prm, grid_, smem_, s);
  CUDA_CHECK(cudaGetLastError());
}

void Blocks::set_clock(bool on) {
  // Four stamps a task (start, ready, end, SM), and read_once's two of the meeting after them.
  if (on && !clock_stamps_.get())
    clock_stamps_ = study::DeviceBuffer<unsigned long long>((form_.read_once() ? 6 : 4) * sched_.tasks.size());
  if (on) CUDA_CHECK(cudaMemset(clock_stamps_.get(), 0, clock_stamps_.bytes()));
  clock_ = on;
}

std::vector<TaskTime> Blocks::task_times() const {
  if (!clock_stamps_.get()) throw study::StudyError(study::ErrorKind::Usage, "no forward ran with the task clock on");
  const std::vector<unsigned long long> st = study::to_host(clock_stamps_);
  unsigned long long first = ~0ull;
  for (std::size_t i = 0; i < sched_.tasks.size(); ++i)
    if (st[4 * i]) first = std::min(first, st[4 * i]);
  std::vector<TaskTime> out;
  out.reserve(sched_.tasks.size());
  auto us = [first](unsigned long long ns) { return ns ? (static_cast<double>(ns - first)) / 1e3 : -1.0; };
  for (std::size_t i = 0; i < sched_.tasks.size(); ++i) {
    const tiles::Task& t = sched_.tasks[i];
    const bool met = form_.read_once() && tiles::is_gemm(t.kind);
    const std::size_t meet = 4 * sched_.tasks.size() + 2 * i;  // read_once's stamps of the meeting
    out.push_back({tiles::name(t.kind), t.block, t.row_tile, t.col, t.slice, static_cast<int>(st[4 * i + 3]),
                   us(st[4 * i]), us(st[4 * i + 1]), us(st[4 * i + 2]), met ? us(st[meet]) : -1.0,
                   met ? us(st[meet + 1]) : -1.0, t.waits, t.signals});
  }
  return out;
}

std::string Blocks::dependency_state() const {
  const std::vector<unsigned> st = study::to_host(state_);
  const std::size_t n = sched_.final_counts.size();
  std::string why;
  if (auto differs = tiles::table_differs(sched_, study::to_host(tasks_)); !differs.empty())
    why += "the task table on the device: " + differs + "; ";
  if (st[1]) why += std::to_string(st[1]) + " waits timed out; ";
  const unsigned tickets = static_cast<unsigned>(sched_.tasks.size()) + static_cast<unsigned>(grid_);
  if (st[0] != tickets)
    why += "tickets taken " + std::to_string(st[0]) + ", not " + std::to_string(tickets) + "; ";
  int shown = 0;
  for (std::size_t c = 0; c < n; ++c)
    if (st[kStateHead + c] != sched_.final_counts[c] && shown++ < 4)
      why += sched_.counter_names[c] + " at " + std::to_string(st[kStateHead + c]) + ", not " +
             std::to_string(sched_.final_counts[c]) + "; ";
  // Each split tile's arrivals: back at 0 (fc2's), or every slice of every block (read_once's).
  std::size_t a = 0;
  for (int i = 0; i < (form_.read_once() ? kGemms : 1); ++i) {
    const GemmDims d = gemm_dims(sched_.shape, form_.read_once() ? i : kGemms - 1);
    const unsigned want = form_.read_once() ? static_cast<unsigned>(d.split * p_.model.layers) : 0u;
    const std::size_t tiles = static_cast<std::size_t>(form_.read_once() ? sched_.row_groups : sched_.row_tiles) * d.n / kBN;
    for (std::size_t k = 0; k < tiles; ++k, ++a)
      if (st[kStateHead + n + a] != want && shown++ < 8)
        why += "split tile " + std::to_string(a) + "'s arrivals at " + std::to_string(st[kStateHead + n + a]) +
               ", not " + std::to_string(want) + "; ";
  }
  return why;
}

}  // namespace encoder::tiled
