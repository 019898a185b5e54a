#include "encoder/tile_schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace encoder::tiles {

const char* name(Kind k) {
  switch (k) {
    case Kind::Ln1: return "ln1";
    case Kind::Qkv: return "qkv";
    case Kind::Attention: return "attention";
    case Kind::Projection: return "projection";
    case Kind::Ln2: return "ln2";
    case Kind::Fc1: return "fc1";
    case Kind::Fc2: return "fc2";
  }
  return "?";
}

std::string waits_text(const std::vector<Wait>& waits) {
  std::string out;
  for (const Wait& w : waits)
    out += (out.empty() ? "" : " ") + std::to_string(w.counter) + ':' + std::to_string(w.target);
  return out;
}

Shape vit_shape(int hidden, int blocks, int tokens, int images, int fc2_split, bool ln_tasks) {
  Shape s;
  s.rows = tokens * images;
  s.hidden = hidden;
  s.heads = hidden / kTile;
  s.mlp_hidden = 4 * hidden;
  s.blocks = blocks;
  s.fc2_split = fc2_split;
  s.ln_tasks = ln_tasks;
  return s;
}

bool is_gemm(Kind k) { return k == Kind::Qkv || k == Kind::Projection || k == Kind::Fc1 || k == Kind::Fc2; }

int split_of(const Shape& s, Kind k) {
  switch (k) {
    case Kind::Qkv: return s.qkv_split;
    case Kind::Projection: return s.proj_split;
    case Kind::Fc1: return s.fc1_split;
    case Kind::Fc2: return s.fc2_split;
    default: return 1;
  }
}

namespace {

// The fewest slices (a divisor of k_tiles) that give `groups` x `cols` x slices >= ctas tasks
// and slices of at most max_chunks 64-wide columns (0: any).
int split_for(int groups, int cols, int k_tiles, int ctas, int max_chunks) {
  for (int d = 1; d <= k_tiles; ++d)
    if (k_tiles % d == 0 && groups * cols * d >= ctas && (max_chunks <= 0 || k_tiles / d <= max_chunks)) return d;
  return k_tiles;
}

}  // namespace

Shape read_once_shape(int hidden, int blocks, int tokens, int images, int ctas, int max_chunks) {
  Shape s = vit_shape(hidden, blocks, tokens, images, 1);
  s.gemm_rows = 4;
  const int groups = ((s.rows + kTile - 1) / kTile + s.gemm_rows - 1) / s.gemm_rows;
  const int cols = hidden / kTile, mlp_cols = s.mlp_hidden / kTile;
  s.qkv_split = split_for(groups, 3 * cols, cols, ctas, max_chunks);
  s.proj_split = split_for(groups, cols, cols, ctas, max_chunks);
  s.fc1_split = split_for(groups, mlp_cols, cols, ctas, max_chunks);
  s.fc2_split = split_for(groups, cols, mlp_cols, ctas, max_chunks);
  return s;
}

std::string refuses(const Shape& s) {
  if (s.rows <= 0 || s.blocks <= 0 || s.heads <= 0) return "rows, blocks and heads must be positive";
  if (s.hidden <= 0 || s.hidden % kTile) return "hidden must be a positive multiple of 64";
  if (s.hidden != s.heads * kTile) return "a head must be 64 columns wide (hidden = 64 x heads)";
  if (s.mlp_hidden <= 0 || s.mlp_hidden % kTile) return "mlp_hidden must be a positive multiple of 64";
  if (s.fc2_split <= 0 || (s.mlp_hidden / kTile) % s.fc2_split)
    return "fc2_split must divide mlp_hidden / 64";
  for (int split : {s.qkv_split, s.proj_split, s.fc1_split})
    if (split <= 0 || (s.hidden / kTile) % split) return "qkv_split, proj_split and fc1_split must divide hidden / 64";
  if (s.gemm_rows <= 0) return "gemm_rows must be positive";
  if (s.gemm_rows > 1 && s.ln_tasks) return "LayerNorm tasks need 64-row GEMM tasks (gemm_rows 1)";
  if (s.qkv_buffers <= 0) return "qkv_buffers must be positive";
  return {};
}

namespace {

// The counters of one block, each per row group (of gemm_rows row tiles; a row tile when
// gemm_rows is 1) or per head; with LayerNorm tasks two more per row tile, after the others.
struct Counters {
  int groups, row_tiles, heads;
  bool ln;
  int q(int b, int g, int h) const { return block(b) + g * heads + h; }                 // a Q tile stored
  int kv(int b, int h) const { return block(b) + groups * heads + h; }                   // K and V tiles of a head
  int attention(int b, int g) const { return block(b) + groups * heads + heads + g; }     // heads done
  int projection(int b, int g) const { return attention(b, g) + groups; }                // columns done
  int fc1(int b, int g) const { return attention(b, g) + 2 * groups; }
  int fc2(int b, int g) const { return attention(b, g) + 3 * groups; }                   // tiles x slices
  int ln1(int b, int m) const { return attention(b, 0) + 4 * groups + m; }
  int ln2(int b, int m) const { return ln1(b, m) + row_tiles; }
  int per_block() const { return groups * heads + heads + 4 * groups + (ln ? 2 * row_tiles : 0); }
  int block(int b) const { return b * per_block(); }
};

// A row group's rows, as counters and faults name them: "rows 3" (a 64-row tile) or "rows 0-3"
// (the row tiles of a group).
std::string rows_text(int first, int last) {
  return " rows " + std::to_string(first) + (last > first ? "-" + std::to_string(last) : "");
}

}  // namespace

Schedule build(const Shape& s) {
  if (std::string why = refuses(s); !why.empty()) throw std::invalid_argument("tile schedule: " + why);
  Schedule sched;
  sched.shape = s;
  const int rt = sched.row_tiles = (s.rows + kTile - 1) / kTile;
  const int G = s.gemm_rows, gr = sched.row_groups = (rt + G - 1) / G;
  const int cols = s.hidden / kTile, mlp_cols = s.mlp_hidden / kTile;
  const Counters c{gr, rt, s.heads, s.ln_tasks};
  // A group's row tiles: the last group may hold fewer.
  const auto tiles_in = [&](int g) { return std::min(G, rt - g * G); };
  const auto group_rows = [&](int g) { return rows_text(g * G, g * G + tiles_in(g) - 1); };
  sched.final_counts.assign(static_cast<std::size_t>(c.per_block()) * s.blocks, 0);
  sched.counter_names.resize(sched.final_counts.size());
  for (int b = 0; b < s.blocks; ++b) {
    const std::string blk = "block " + std::to_string(b) + " ";
    for (int g = 0; g < gr; ++g) {
      const std::string rows = group_rows(g);
      for (int h = 0; h < s.heads; ++h)
        sched.counter_names[c.q(b, g, h)] = blk + "Q tile" + rows + " head " + std::to_string(h);
      sched.counter_names[c.attention(b, g)] = blk + "attention" + rows;
      sched.counter_names[c.projection(b, g)] = blk + "projection" + rows;
      sched.counter_names[c.fc1(b, g)] = blk + "fc1" + rows;
      sched.counter_names[c.fc2(b, g)] = blk + "fc2" + rows;
    }
    if (s.ln_tasks)
      for (int m = 0; m < rt; ++m) {
        sched.counter_names[c.ln1(b, m)] = blk + "LN1" + rows_text(m, m);
        sched.counter_names[c.ln2(b, m)] = blk + "LN2" + rows_text(m, m);
      }
    for (int h = 0; h < s.heads; ++h) sched.counter_names[c.kv(b, h)] = blk + "K and V of head " + std::to_string(h);
  }
  auto add = [&](Kind k, int b, int m, int col, int slice, std::vector<Wait> waits, int signals) {
    sched.tasks.push_back({k, b, m, col, slice, std::move(waits), signals});
    ++sched.final_counts[signals];
  };
  // Phase by phase, block by block: a task's inputs always hold smaller tickets. A split GEMM's
  // slices of one output tile hold consecutive tickets.
  const auto all = [](int n) { return static_cast<unsigned>(n); };
  for (int b = 0; b < s.blocks; ++b) {
    // What a row group's LayerNorm 1 (folded into QKV, or its task) waits for: block 0 reads the
    // patch embedding, done before the kernel starts; a later block its rows' every fc2 slice.
    auto rows_in = [&](int g) {
      std::vector<Wait> w;
      if (b > 0) w.push_back({c.fc2(b - 1, g), all(cols * s.fc2_split)});
      return w;
    };
    if (s.ln_tasks)
      for (int m = 0; m < rt; ++m) add(Kind::Ln1, b, m, 0, 0, rows_in(m), c.ln1(b, m));
    for (int g = 0; g < gr; ++g)
      for (int col = 0; col < 3 * cols; ++col)
        for (int k = 0; k < s.qkv_split; ++k) {
          std::vector<Wait> w = s.ln_tasks ? std::vector<Wait>{{c.ln1(b, g), 1u}} : rows_in(g);
          const int h = col % s.heads;
          add(Kind::Qkv, b, g, col, k, std::move(w), col < cols ? c.q(b, g, h) : c.kv(b, h));
        }
    for (int m = 0; m < rt; ++m)
      for (int h = 0; h < s.heads; ++h)
        add(Kind::Attention, b, m, h, 0, {{c.q(b, m / G, h), all(s.qkv_split)}, {c.kv(b, h), all(2 * gr * s.qkv_split)}},
            c.attention(b, m / G));
    for (int g = 0; g < gr; ++g)
      for (int n = 0; n < cols; ++n)
        for (int k = 0; k < s.proj_split; ++k)
          add(Kind::Projection, b, g, n, k, {{c.attention(b, g), all(s.heads * tiles_in(g))}}, c.projection(b, g));
    const unsigned projected = all(cols * s.proj_split);  // a row group's projection tiles and slices
    if (s.ln_tasks)
      for (int m = 0; m < rt; ++m) add(Kind::Ln2, b, m, 0, 0, {{c.projection(b, m), projected}}, c.ln2(b, m));
    for (int g = 0; g < gr; ++g)
      for (int n = 0; n < mlp_cols; ++n)
        for (int k = 0; k < s.fc1_split; ++k)
          add(Kind::Fc1, b, g, n, k, {s.ln_tasks ? Wait{c.ln2(b, g), 1u} : Wait{c.projection(b, g), projected}},
              c.fc1(b, g));
    for (int g = 0; g < gr; ++g)
      for (int n = 0; n < cols; ++n)
        for (int k = 0; k < s.fc2_split; ++k)
          add(Kind::Fc2, b, g, n, k, {{c.fc1(b, g), all(mlp_cols * s.fc1_split)}}, c.fc2(b, g));
  }
  return sched;
}

namespace {

// The tiles a task reads and writes, from the forward's data flow alone. Buffers, each in
// 64 x 64 tiles: the residual stream x [rows, hidden] (updated in place by the projection and fc2),
// qkv [rows, 3 hidden] (one of qkv_buffers, by block), the attention output [rows, hidden],
// fc1's output h [rows, mlp_hidden] and, with LayerNorm tasks, their output ln [rows, hidden]
// (LN1's and LN2's in turn).
struct Tiles {
  int row_tiles, cols, mlp_cols, qkv_buffers;
  bool ln;
  int gemm_rows;
  // The row tiles a task covers: a GEMM task's group, another task's own tile.
  int first_row(const Task& t) const { return is_gemm(t.kind) ? t.row_tile * gemm_rows : t.row_tile; }
  int end_row(const Task& t) const {
    return is_gemm(t.kind) ? std::min(row_tiles, (t.row_tile + 1) * gemm_rows) : t.row_tile + 1;
  }
  int x(int m, int n) const { return m * cols + n; }
  int qkv(int b, int m, int n) const {
    return row_tiles * cols + (b % qkv_buffers) * row_tiles * 3 * cols + m * 3 * cols + n;
  }
  int attn(int m, int n) const { return row_tiles * cols * (1 + 3 * qkv_buffers) + m * cols + n; }
  int h(int m, int n) const { return row_tiles * cols * (2 + 3 * qkv_buffers) + m * mlp_cols + n; }
  int ln_tile(int m, int n) const { return row_tiles * (cols * (2 + 3 * qkv_buffers) + mlp_cols) + m * cols + n; }
  int count() const { return row_tiles * (cols * (2 + 3 * qkv_buffers + (ln ? 1 : 0)) + mlp_cols); }
};

void touched(const Task& t, const Tiles& z, const Shape& s, std::vector<int>& reads, std::vector<int>& writes) {
  reads.clear();
  writes.clear();
  const int heads = s.heads;
  // The columns of a K slice, out of `k_cols` 64-wide columns of the GEMM's input.
  const int split = split_of(s, t.kind);
  const auto slice_cols = [&](int k_cols, auto&& read) {
    const int per = k_cols / split;
    for (int n = t.slice * per; n < (t.slice + 1) * per; ++n) read(n);
  };
  for (int m = z.first_row(t); m < z.end_row(t); ++m) {
    // A QKV or fc1 task's input: its rows of the LayerNorm tasks' output, or of the residual
    // stream that it normalizes itself (whole rows, whatever its K slice: a row's statistics).
    auto normalized_rows = [&] {
      for (int n = 0; n < z.cols; ++n) reads.push_back(z.ln ? z.ln_tile(m, n) : z.x(m, n));
    };
    switch (t.kind) {
      case Kind::Ln1:
      case Kind::Ln2:
        for (int n = 0; n < z.cols; ++n) reads.push_back(z.x(m, n));
        for (int n = 0; n < z.cols; ++n) writes.push_back(z.ln_tile(m, n));
        break;
      case Kind::Qkv:
        normalized_rows();
        writes.push_back(z.qkv(t.block, m, t.col));
        break;
      case Kind::Attention:
        reads.push_back(z.qkv(t.block, m, t.col));
        for (int r = 0; r < z.row_tiles; ++r) {
          reads.push_back(z.qkv(t.block, r, heads + t.col));
          reads.push_back(z.qkv(t.block, r, 2 * heads + t.col));
        }
        writes.push_back(z.attn(m, t.col));
        break;
      case Kind::Projection:
        slice_cols(z.cols, [&](int n) { reads.push_back(z.attn(m, n)); });
        reads.push_back(z.x(m, t.col));
        writes.push_back(z.x(m, t.col));
        break;
      case Kind::Fc1:
        normalized_rows();
        writes.push_back(z.h(m, t.col));
        break;
      case Kind::Fc2:
        slice_cols(z.mlp_cols, [&](int n) { reads.push_back(z.h(m, n)); });
        reads.push_back(z.x(m, t.col));
        writes.push_back(z.x(m, t.col));
        break;
    }
  }
}

std::string describe(const Task& t, const Tiles& z, const Shape& s) {
  std::string d = std::string(name(t.kind)) + " of block " + std::to_string(t.block) + "," +
                  rows_text(z.first_row(t), z.end_row(t) - 1);
  if (t.kind != Kind::Ln1 && t.kind != Kind::Ln2)
    d += (t.kind == Kind::Attention ? ", head " : ", columns ") + std::to_string(t.col);
  if (t.kind == Kind::Fc2 || split_of(s, t.kind) > 1) d += ", slice " + std::to_string(t.slice);
  return d;
}

// A GEMM's slices of one output tile (fc2's, and those of any split GEMM) add into it in the
// order they arrive (the last one adds the others' fp32 partial sums): the one pair of tasks that
// touch a tile unordered, by design.
bool slices_of_one_tile(const Task& a, const Task& b) {
  return a.kind == b.kind && is_gemm(a.kind) && a.block == b.block && a.row_tile == b.row_tile && a.col == b.col;
}

// The forward's program order: block by block, phase by phase (the tickets' order within a
// phase does not matter: no two tasks of a phase share a tile but fc2's slices).
std::vector<std::size_t> program_order(const Schedule& sched) {
  std::vector<std::size_t> program(sched.tasks.size());
  for (std::size_t i = 0; i < program.size(); ++i) program[i] = i;
  std::stable_sort(program.begin(), program.end(), [&](std::size_t a, std::size_t b) {
    const Task &x = sched.tasks[a], &y = sched.tasks[b];
    return std::tie(x.block, x.kind) < std::tie(y.block, y.kind);
  });
  return program;
}

Tiles tiles_of(const Schedule& sched) {
  return {sched.row_tiles, sched.shape.hidden / kTile, sched.shape.mlp_hidden / kTile, sched.shape.qkv_buffers,
          sched.shape.ln_tasks, sched.shape.gemm_rows};
}

// Counts and deadlock: each wait reachable by smaller tickets alone. Fills each counter's
// signalers in ticket order.
std::string check_counts(const Schedule& sched, std::vector<std::vector<int>>& signalers) {
  if (std::string why = refuses(sched.shape); !why.empty()) return why;
  const std::size_t n = sched.tasks.size(), counters = sched.final_counts.size();
  const Tiles z = tiles_of(sched);
  const auto describe = [&](const Task& t) { return encoder::tiles::describe(t, z, sched.shape); };
  std::vector<unsigned> added(counters, 0);
  signalers.assign(counters, {});
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = sched.tasks[i];
    for (const Wait& w : t.waits) {
      if (w.counter < 0 || static_cast<std::size_t>(w.counter) >= counters)
        return describe(t) + " waits on counter " + std::to_string(w.counter) + ", which does not exist";
      if (added[w.counter] < w.target)
        return describe(t) + " (ticket " + std::to_string(i) + ") waits for " + sched.counter_names[w.counter] +
               " to reach " + std::to_string(w.target) + ", and the smaller tickets add only " +
               std::to_string(added[w.counter]) + ": it could wait forever";
    }
    if (t.signals < 0 || static_cast<std::size_t>(t.signals) >= counters)
      return describe(t) + " signals counter " + std::to_string(t.signals) + ", which does not exist";
    ++added[t.signals];
    signalers[t.signals].push_back(static_cast<int>(i));
  }
  for (std::size_t k = 0; k < counters; ++k)
    if (added[k] != sched.final_counts[k])
      return sched.counter_names[k] + ": a forward adds " + std::to_string(added[k]) + ", final_counts says " +
             std::to_string(sched.final_counts[k]);
  return {};
}

}  // namespace

std::string check_counts(const Schedule& sched) {
  std::vector<std::vector<int>> signalers;
  return check_counts(sched, signalers);
}

std::string check(const Schedule& sched) {
  std::vector<std::vector<int>> signalers;
  if (std::string why = check_counts(sched, signalers); !why.empty()) return why;
  const Shape& s = sched.shape;
  const std::size_t n = sched.tasks.size(), counters = sched.final_counts.size();

  // done_before[i]: the tasks certainly complete when task i's waits are met (a bitset over tickets).
  const std::size_t words = (n + 63) / 64;
  std::vector<std::uint64_t> done_before(n * words, 0);
  auto word = [&](std::size_t i) { return done_before.data() + i * words; };
  std::vector<std::size_t> seen(counters, 0);  // signalers of each counter folded in so far
  std::vector<std::uint64_t> closure(counters * words, 0);
  auto fold = [&](int k) {  // closure[k]: every signaler of k and what each had before it
    std::uint64_t* dst = closure.data() + static_cast<std::size_t>(k) * words;
    for (; seen[k] < signalers[k].size(); ++seen[k]) {
      const int j = signalers[k][seen[k]];
      dst[j / 64] |= std::uint64_t{1} << (j % 64);
      for (std::size_t w = 0; w < words; ++w) dst[w] |= word(j)[w];
    }
    return dst;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (const Wait& w : sched.tasks[i].waits)
      if (w.target == sched.final_counts[w.counter]) {  // all of its signalers hold smaller tickets (above)
        const std::uint64_t* src = fold(w.counter);
        for (std::size_t x = 0; x < words; ++x) word(i)[x] |= src[x];
      }
  auto ordered = [&](std::size_t earlier, std::size_t later) {
    return (word(later)[earlier / 64] >> (earlier % 64)) & 1u;
  };

  // Every pair of tasks touching one tile, in program order.
  const std::vector<std::size_t> program = program_order(sched);
  const Tiles z = tiles_of(sched);
  const auto describe = [&](const Task& t) { return encoder::tiles::describe(t, z, s); };
  std::vector<std::vector<int>> writers(z.count());  // of the tile's last write (fc2: every slice)
  std::vector<std::vector<int>> readers(z.count());  // since then
  std::vector<int> reads, writes;
  auto require = [&](const std::vector<int>& earlier, std::size_t later, const char* hazard) -> std::string {
    for (int e : earlier) {
      if (static_cast<std::size_t>(e) == later) continue;
      const Task &a = sched.tasks[e], &b = sched.tasks[later];
      if (!slices_of_one_tile(a, b) && !ordered(e, later))
        return describe(b) + " is not ordered after " + describe(a) + " (" + hazard + ")";
    }
    return {};
  };
  for (std::size_t i : program) {
    const Task& t = sched.tasks[i];
    touched(t, z, s, reads, writes);
    for (int r : reads)
      if (std::string f = require(writers[r], i, "it reads a tile the other writes"); !f.empty()) return f;
    for (int w : writes) {
      if (std::string f = require(writers[w], i, "both write one tile"); !f.empty()) return f;
      if (std::string f = require(readers[w], i, "it overwrites a tile the other reads"); !f.empty()) return f;
    }
    for (int r : reads) readers[r].push_back(static_cast<int>(i));
    for (int w : writes) {
      if (writers[w].empty() || !slices_of_one_tile(sched.tasks[writers[w].back()], t)) {
        writers[w].clear();
        readers[w].clear();
      }
      writers[w].push_back(static_cast<int>(i));
    }
  }
  return {};
}

std::vector<DeviceTask> device_tasks(const Schedule& sched) {
  std::vector<DeviceTask> out;
  out.reserve(sched.tasks.size());
  for (const Task& t : sched.tasks) {
    if (t.waits.size() > 2) throw std::invalid_argument("tile schedule: a task waits on more than two counters");
    DeviceTask d{static_cast<int>(t.kind), t.block, t.row_tile, t.col, t.slice, static_cast<int>(t.waits.size()),
                 {0, 0}, {0u, 0u}, t.signals};
    for (std::size_t w = 0; w < t.waits.size(); ++w) {
      d.wait_counter[w] = t.waits[w].counter;
      d.wait_target[w] = t.waits[w].target;
    }
    out.push_back(d);
  }
  return out;
}

Schedule from_device(const Schedule& proven, const std::vector<DeviceTask>& table) {
  const Shape& s = proven.shape;
  const int counters = static_cast<int>(proven.final_counts.size());
  const int cols = std::max(3 * s.hidden, s.mlp_hidden) / kTile;  // QKV's or fc1's column tiles
  Schedule out = proven;
  out.tasks.clear();
  out.tasks.reserve(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const DeviceTask& d = table[i];
    const auto bad = [&](const char* what) {
      return std::invalid_argument("tile schedule: device entry " + std::to_string(i) + " has " + what);
    };
    if (d.kind < 0 || d.kind > static_cast<int>(Kind::Fc2)) throw bad("no task kind");
    if (d.block < 0 || d.block >= s.blocks) throw bad("a block out of range");
    const Kind kind = static_cast<Kind>(d.kind);
    if (d.row_tile < 0 || d.row_tile >= (is_gemm(kind) ? proven.row_groups : proven.row_tiles))
      throw bad("a row tile out of range");
    if (d.col < 0 || d.col >= cols || d.slice < 0 || d.slice >= split_of(s, kind))
      throw bad("a column or slice out of range");
    if (d.waits < 0 || d.waits > 2) throw bad("not 0 to 2 waits");
    if (d.signals < 0 || d.signals >= counters) throw bad("a counter out of range");
    Task t{kind, d.block, d.row_tile, d.col, d.slice, {}, d.signals};
    for (int w = 0; w < d.waits; ++w) {
      if (d.wait_counter[w] < 0 || d.wait_counter[w] >= counters) throw bad("a wait on a counter out of range");
      t.waits.push_back({d.wait_counter[w], d.wait_target[w]});
    }
    out.tasks.push_back(std::move(t));
  }
  return out;
}

std::string table_differs(const Schedule& sched, const std::vector<DeviceTask>& table) {
  if (table.size() != sched.tasks.size())
    return "the table holds " + std::to_string(table.size()) + " tasks, the schedule " +
           std::to_string(sched.tasks.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const Task& t = sched.tasks[i];
    const DeviceTask& d = table[i];
    std::string why;
    if (d.kind != static_cast<int>(t.kind) || d.block != t.block || d.row_tile != t.row_tile || d.col != t.col ||
        d.slice != t.slice)
      why = "another task";
    else if (d.signals != t.signals)
      why = "signals counter " + std::to_string(d.signals) + ", not " + std::to_string(t.signals);
    else if (d.waits != static_cast<int>(t.waits.size()))
      why = std::to_string(d.waits) + " waits, not " + std::to_string(t.waits.size());
    else
      for (std::size_t w = 0; w < t.waits.size() && why.empty(); ++w)
        if (d.wait_counter[w] != t.waits[w].counter || d.wait_target[w] != t.waits[w].target)
          why = "waits for counter " + std::to_string(d.wait_counter[w]) + " to reach " +
                std::to_string(d.wait_target[w]) + ", not " + std::to_string(t.waits[w].counter) + " to reach " +
                std::to_string(t.waits[w].target);
    if (!why.empty())
      return "ticket " + std::to_string(i) + " (" + name(t.kind) + " of block " + std::to_string(t.block) + "): " + why;
  }
  return {};
}

TileUses tile_uses(const Schedule& sched) {
  if (std::string why = refuses(sched.shape); !why.empty()) throw std::invalid_argument("tile schedule: " + why);
  const std::size_t n = sched.tasks.size();
  const Tiles z = tiles_of(sched);
  TileUses u;
  u.tiles = z.count();
  u.final_writes.assign(z.count(), 0);
  std::vector<std::vector<int>> reads(n), writes(n);
  std::vector<std::vector<unsigned>> expect(n);
  for (std::size_t i : program_order(sched)) {
    const Task& t = sched.tasks[i];
    touched(t, z, sched.shape, reads[i], writes[i]);
    if (t.kind == Kind::Fc2 || split_of(sched.shape, t.kind) > 1)
      for (int w : writes[i]) reads[i].erase(std::remove(reads[i].begin(), reads[i].end(), w), reads[i].end());
    for (int r : reads[i]) expect[i].push_back(u.final_writes[r]);
    for (int w : writes[i]) ++u.final_writes[w];
  }
  u.read_begin.push_back(0);
  u.write_begin.push_back(0);
  for (std::size_t i = 0; i < n; ++i) {
    u.read_tile.insert(u.read_tile.end(), reads[i].begin(), reads[i].end());
    u.read_expect.insert(u.read_expect.end(), expect[i].begin(), expect[i].end());
    u.write_tile.insert(u.write_tile.end(), writes[i].begin(), writes[i].end());
    u.read_begin.push_back(static_cast<int>(u.read_tile.size()));
    u.write_begin.push_back(static_cast<int>(u.write_tile.size()));
  }
  return u;
}

}  // namespace encoder::tiles
