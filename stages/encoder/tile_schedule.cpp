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

std::string refuses(const Shape& s) {
  if (s.rows <= 0 || s.blocks <= 0 || s.heads <= 0) return "rows, blocks and heads must be positive";
  if (s.hidden <= 0 || s.hidden % kTile) return "hidden must be a positive multiple of 64";
  if (s.hidden != s.heads * kTile) return "a head must be 64 columns wide (hidden = 64 x heads)";
  if (s.mlp_hidden <= 0 || s.mlp_hidden % kTile) return "mlp_hidden must be a positive multiple of 64";
  if (s.fc2_split <= 0 || (s.mlp_hidden / kTile) % s.fc2_split)
    return "fc2_split must divide mlp_hidden / 64";
  if (s.qkv_buffers <= 0) return "qkv_buffers must be positive";
  return {};
}

namespace {

// The counters of one block, each per row tile or per head; with LayerNorm tasks two more per
// row tile, after the others.
struct Counters {
  int row_tiles, heads;
  bool ln;
  int q(int b, int m, int h) const { return block(b) + m * heads + h; }                 // a Q tile stored
  int kv(int b, int h) const { return block(b) + row_tiles * heads + h; }                // K and V tiles of a head
  int attention(int b, int m) const { return block(b) + row_tiles * heads + heads + m; }  // heads done
  int projection(int b, int m) const { return attention(b, m) + row_tiles; }             // columns done
  int fc1(int b, int m) const { return attention(b, m) + 2 * row_tiles; }
  int fc2(int b, int m) const { return attention(b, m) + 3 * row_tiles; }                // tiles x slices
  int ln1(int b, int m) const { return attention(b, m) + 4 * row_tiles; }
  int ln2(int b, int m) const { return attention(b, m) + 5 * row_tiles; }
  int per_block() const { return row_tiles * heads + heads + (ln ? 6 : 4) * row_tiles; }
  int block(int b) const { return b * per_block(); }
};

}  // namespace

Schedule build(const Shape& s) {
  if (std::string why = refuses(s); !why.empty()) throw std::invalid_argument("tile schedule: " + why);
  Schedule sched;
  sched.shape = s;
  const int rt = sched.row_tiles = (s.rows + kTile - 1) / kTile;
  const int cols = s.hidden / kTile, mlp_cols = s.mlp_hidden / kTile;
  const Counters c{rt, s.heads, s.ln_tasks};
  sched.final_counts.assign(static_cast<std::size_t>(c.per_block()) * s.blocks, 0);
  sched.counter_names.resize(sched.final_counts.size());
  for (int b = 0; b < s.blocks; ++b) {
    const std::string blk = "block " + std::to_string(b) + " ";
    for (int m = 0; m < rt; ++m) {
      const std::string rows = " rows " + std::to_string(m);
      for (int h = 0; h < s.heads; ++h)
        sched.counter_names[c.q(b, m, h)] = blk + "Q tile" + rows + " head " + std::to_string(h);
      sched.counter_names[c.attention(b, m)] = blk + "attention" + rows;
      sched.counter_names[c.projection(b, m)] = blk + "projection" + rows;
      sched.counter_names[c.fc1(b, m)] = blk + "fc1" + rows;
      sched.counter_names[c.fc2(b, m)] = blk + "fc2" + rows;
      if (s.ln_tasks) {
        sched.counter_names[c.ln1(b, m)] = blk + "LN1" + rows;
        sched.counter_names[c.ln2(b, m)] = blk + "LN2" + rows;
      }
    }
    for (int h = 0; h < s.heads; ++h) sched.counter_names[c.kv(b, h)] = blk + "K and V of head " + std::to_string(h);
  }
  auto add = [&](Kind k, int b, int m, int col, int slice, std::vector<Wait> waits, int signals) {
    sched.tasks.push_back({k, b, m, col, slice, std::move(waits), signals});
    ++sched.final_counts[signals];
  };
  // Phase by phase, block by block: a task's inputs always hold smaller tickets.
  for (int b = 0; b < s.blocks; ++b) {
    // What a row tile's LayerNorm 1 waits for: block 0 reads the patch embedding, done before the
    // kernel starts; a later block its rows' every fc2 slice.
    auto rows_in = [&](int m) {
      std::vector<Wait> w;
      if (b > 0) w.push_back({c.fc2(b - 1, m), static_cast<unsigned>(cols * s.fc2_split)});
      return w;
    };
    if (s.ln_tasks)
      for (int m = 0; m < rt; ++m) add(Kind::Ln1, b, m, 0, 0, rows_in(m), c.ln1(b, m));
    for (int m = 0; m < rt; ++m)
      for (int col = 0; col < 3 * cols; ++col) {
        std::vector<Wait> w = s.ln_tasks ? std::vector<Wait>{{c.ln1(b, m), 1u}} : rows_in(m);
        const int h = col % s.heads;
        add(Kind::Qkv, b, m, col, 0, std::move(w), col < cols ? c.q(b, m, h) : c.kv(b, h));
      }
    for (int m = 0; m < rt; ++m)
      for (int h = 0; h < s.heads; ++h)
        add(Kind::Attention, b, m, h, 0, {{c.q(b, m, h), 1u}, {c.kv(b, h), static_cast<unsigned>(2 * rt)}},
            c.attention(b, m));
    for (int m = 0; m < rt; ++m)
      for (int n = 0; n < cols; ++n)
        add(Kind::Projection, b, m, n, 0, {{c.attention(b, m), static_cast<unsigned>(s.heads)}}, c.projection(b, m));
    const unsigned projected = static_cast<unsigned>(cols);  // a row tile's projection tiles
    if (s.ln_tasks)
      for (int m = 0; m < rt; ++m) add(Kind::Ln2, b, m, 0, 0, {{c.projection(b, m), projected}}, c.ln2(b, m));
    for (int m = 0; m < rt; ++m)
      for (int n = 0; n < mlp_cols; ++n)
        add(Kind::Fc1, b, m, n, 0, {s.ln_tasks ? Wait{c.ln2(b, m), 1u} : Wait{c.projection(b, m), projected}},
            c.fc1(b, m));
    for (int m = 0; m < rt; ++m)
      for (int n = 0; n < cols; ++n)
        for (int k = 0; k < s.fc2_split; ++k)
          add(Kind::Fc2, b, m, n, k, {{c.fc1(b, m), static_cast<unsigned>(mlp_cols)}}, c.fc2(b, m));
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
  int x(int m, int n) const { return m * cols + n; }
  int qkv(int b, int m, int n) const {
    return row_tiles * cols + (b % qkv_buffers) * row_tiles * 3 * cols + m * 3 * cols + n;
  }
  int attn(int m, int n) const { return row_tiles * cols * (1 + 3 * qkv_buffers) + m * cols + n; }
  int h(int m, int n) const { return row_tiles * cols * (2 + 3 * qkv_buffers) + m * mlp_cols + n; }
  int ln_tile(int m, int n) const { return row_tiles * (cols * (2 + 3 * qkv_buffers) + mlp_cols) + m * cols + n; }
  int count() const { return row_tiles * (cols * (2 + 3 * qkv_buffers + (ln ? 1 : 0)) + mlp_cols); }
};

void touched(const Task& t, const Tiles& z, int heads, int split, std::vector<int>& reads, std::vector<int>& writes) {
  reads.clear();
  writes.clear();
  const int m = t.row_tile;
  // A QKV or fc1 task's input: its rows of the LayerNorm tasks' output, or of the residual stream
  // that it normalizes itself.
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
      for (int n = 0; n < z.cols; ++n) reads.push_back(z.attn(m, n));
      reads.push_back(z.x(m, t.col));
      writes.push_back(z.x(m, t.col));
      break;
    case Kind::Fc1:
      normalized_rows();
      writes.push_back(z.h(m, t.col));
      break;
    case Kind::Fc2: {
      const int per = z.mlp_cols / split;
      for (int n = t.slice * per; n < (t.slice + 1) * per; ++n) reads.push_back(z.h(m, n));
      reads.push_back(z.x(m, t.col));
      writes.push_back(z.x(m, t.col));
      break;
    }
  }
}

std::string describe(const Task& t) {
  std::string s = std::string(name(t.kind)) + " of block " + std::to_string(t.block) + ", rows " +
                  std::to_string(t.row_tile);
  if (t.kind != Kind::Ln1 && t.kind != Kind::Ln2)
    s += (t.kind == Kind::Attention ? ", head " : ", columns ") + std::to_string(t.col);
  if (t.kind == Kind::Fc2) s += ", slice " + std::to_string(t.slice);
  return s;
}

// fc2's slices of one output tile add into it in the order they arrive (the last one adds the
// others' fp32 partial sums): the one pair of tasks that touch a tile unordered, by design.
bool slices_of_one_tile(const Task& a, const Task& b) {
  return a.kind == Kind::Fc2 && b.kind == Kind::Fc2 && a.block == b.block && a.row_tile == b.row_tile &&
         a.col == b.col;
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
          sched.shape.ln_tasks};
}

// Counts and deadlock: each wait reachable by smaller tickets alone. Fills each counter's
// signalers in ticket order.
std::string check_counts(const Schedule& sched, std::vector<std::vector<int>>& signalers) {
  if (std::string why = refuses(sched.shape); !why.empty()) return why;
  const std::size_t n = sched.tasks.size(), counters = sched.final_counts.size();
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
    touched(t, z, s.heads, s.fc2_split, reads, writes);
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
    if (d.row_tile < 0 || d.row_tile >= proven.row_tiles) throw bad("a row tile out of range");
    if (d.col < 0 || d.col >= cols || d.slice < 0 || d.slice >= s.fc2_split) throw bad("a column or slice out of range");
    if (d.waits < 0 || d.waits > 2) throw bad("not 0 to 2 waits");
    if (d.signals < 0 || d.signals >= counters) throw bad("a counter out of range");
    Task t{static_cast<Kind>(d.kind), d.block, d.row_tile, d.col, d.slice, {}, d.signals};
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
    touched(t, z, sched.shape.heads, sched.shape.fc2_split, reads[i], writes[i]);
    if (t.kind == Kind::Fc2)
      reads[i].erase(std::remove(reads[i].begin(), reads[i].end(), writes[i].front()), reads[i].end());
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
