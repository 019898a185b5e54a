// The schedule of the tile-scheduled forward (stages/encoder/NOTES.md, "The tile-scheduled
// forward"): every encoder block's work as 64-row x 64-column tasks, dealt out to persistent CTAs
// by one global ticket in the order of `tasks`. A task waits until each of its counters reaches
// its target, runs, then adds one to its own counter. No barrier: a task starts as soon as the
// tiles it reads exist. The kernel reads this table; its tests read every counter back after a
// forward and require `final_counts` exactly, and `check` proves on the host, from the data flow
// alone, that the counters order every pair of tasks that touch the same tile (what a missing or
// short wait would break) and that the ticket order cannot deadlock. Rows are the tokens of every
// image in a row: an attention task waits for its head's keys and values in every row tile, which
// at batch 1 is exactly what it reads and at larger batches more.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace encoder::tiles {

constexpr int kTile = 64;  // rows and columns of a task; also the head width the schedule needs

// In the forward's program order within a block (check and tile_uses sort by it).
enum class Kind : std::uint8_t { Ln1, Qkv, Attention, Projection, Ln2, Fc1, Fc2 };
const char* name(Kind k);

struct Shape {
  int rows = 0;        // tokens x images (197 at vit_b 224 px, batch 1)
  int hidden = 0;      // a multiple of 64
  int heads = 0;       // hidden / heads must be 64
  int mlp_hidden = 0;  // a multiple of 64
  int blocks = 0;
  int fc2_split = 1;   // fc2's K split into this many slices (mlp_hidden / 64 divisible by it)
  // The other GEMMs' K splits (hidden / 64 divisible by each). A split GEMM's output tile is
  // `split` tasks, one K slice each, that add their partial sums among themselves in any order
  // (as fc2's slices do); the tile is complete once every slice has signalled.
  int qkv_split = 1, proj_split = 1, fc1_split = 1;
  // The rows of a GEMM task, in 64-row tiles: 1 (64 x 64 tasks), or more so that a weight tile
  // is read once per `gemm_rows` row tiles (4: the 197 rows of a batch-1 forward in one tile of
  // 256, each weight read once). Attention tasks keep 64 queries. Not with LayerNorm tasks.
  int gemm_rows = 1;
  // QKV's output buffers, used in turn by the blocks. With one, block b+1's QKV tile of rows m
  // could overwrite keys that block b's attention of other rows still reads: check finds it.
  int qkv_buffers = 2;
  // LayerNorm tasks: each 64-row tile's LN1 and LN2 once, into an `ln` buffer [rows, hidden] that
  // the QKV and fc1 tasks read (they wait for it). Without them each QKV and fc1 task normalizes
  // its own copy of its rows.
  bool ln_tasks = false;
};
// A ViT's shape: `blocks` blocks of width `hidden` (64-wide heads, MLP 4 x hidden) over
// tokens x images rows.
Shape vit_shape(int hidden, int blocks, int tokens, int images, int fc2_split, bool ln_tasks = false);
// The read-once tiling of the same ViT: GEMM tasks of 256 rows (gemm_rows 4), each GEMM's K split
// into the fewest slices (a divisor of its K / 64) that give at least `ctas` tasks (every slice
// of every K / 64 when none does), so that `ctas` CTAs have work at every GEMM; with max_chunks,
// into at least enough slices that none is wider than max_chunks 64-wide columns (a kernel that
// holds a task's weight slice in shared memory).
Shape read_once_shape(int hidden, int blocks, int tokens, int images, int ctas, int max_chunks = 0);

// The kinds that are GEMMs (their tasks span gemm_rows row tiles and may be split along K), and
// the K split of one.
bool is_gemm(Kind k);
int split_of(const Shape& s, Kind k);
// Why the schedule cannot describe s; empty when it can.
std::string refuses(const Shape& s);

struct Wait {
  int counter = 0;
  unsigned target = 0;
};
// "counter:target ...", space-separated: how the task clock's CSV and tile_schedule_csv write a
// task's waits (experiments/probes/task_table.py reads them).
std::string waits_text(const std::vector<Wait>& waits);

struct Task {
  Kind kind = Kind::Qkv;
  int block = 0;
  // Rows [64 row_tile, 64 row_tile + 64) of the block's activations; a GEMM task's row group:
  // row tiles [gemm_rows x row_tile, gemm_rows x (row_tile + 1)), the last group partial.
  int row_tile = 0;
  int col = 0;       // the output column tile; the head for attention; 0 for a LayerNorm (every column)
  int slice = 0;     // a split GEMM's K slice
  std::vector<Wait> waits;  // at most two
  int signals = 0;          // the counter this task adds one to when its output is stored
};

struct Schedule {
  Shape shape;
  int row_tiles = 0;
  int row_groups = 0;                  // of gemm_rows row tiles each (row_tiles when gemm_rows is 1)
  std::vector<Task> tasks;            // in ticket order
  std::vector<unsigned> final_counts;  // each counter after one complete forward
  std::vector<std::string> counter_names;
};

// Throws std::invalid_argument with refuses(s) when the schedule cannot describe s.
Schedule build(const Shape& s);

// Empty when the schedule is sound; otherwise the first fault found:
// - two tasks that touch one 64 x 64 tile of a buffer (a read after a write, a write after a read
//   or two writes, in the forward's program order), the later one not ordered after the earlier
//   by its waits. What a task touches comes from the data flow, not from the counters: a QKV task
//   reads its rows of the residual stream and writes its tile of qkv, attention reads its head's
//   Q tile and its K and V in every row tile, and so on. A wait orders a task after a counter's
//   tasks only when its target is all of them (fewer could be any of them);
// - a wait whose target the tasks with smaller tickets do not reach (a CTA holding that ticket
//   could wait forever while later tickets wait for it);
// - final_counts not the sum of the tasks' signals.
// The ordering proof keeps, for every task, the set of tasks certainly done before it: n^2 / 8
// bytes for n tasks (2 GiB at ~130k tasks, vit_b 224 px at batch ~24; batch 256 would need 270 GB).
std::string check(const Schedule& sched);

// The last two faults alone (linear in the tasks): what can be proved at any batch.
std::string check_counts(const Schedule& sched);

// The most tasks the constructor of a tile-scheduled forward proves `check` for; above it (large
// batches, where the tile form is not the fast choice), `check_counts`. The tests run `check`
// at every shape they use.
inline constexpr std::size_t kOrderProofMaxTasks = std::size_t{1} << 17;

// A task as the GPU kernels read it (tile_device.cuh), and the schedule's tasks so, in ticket
// order. Throws std::invalid_argument for a task with more than two waits.
struct DeviceTask {
  int kind, block, row_tile, col, slice;
  int waits, wait_counter[2];
  unsigned wait_target[2];
  int signals;
};
std::vector<DeviceTask> device_tasks(const Schedule& sched);
// The schedule a device table describes, read back entry by entry (the inverse of device_tasks),
// with `proven`'s shape, counters and final counts: what `check` proves when the forward is set up
// is the table the GPU reads, not the host's copy it was made from. Throws std::invalid_argument
// for an entry that is no task of that shape (a kind, block, row tile, column, slice, counter or
// wait count out of range).
Schedule from_device(const Schedule& proven, const std::vector<DeviceTask>& table);
// Empty when `table` holds exactly `sched`'s tasks in ticket order; otherwise the first entry that
// differs and how (the GPU tests compare the table read back from the device with it).
std::string table_differs(const Schedule& sched, const std::vector<DeviceTask>& table);

// What each task touches, for the dry run on the GPU (tile_dry_run.hpp): the tiles it reads,
// each with the number of writes that tile has had before the task in program order (what the
// task must find there: fewer is a read too early, more an overwrite too early), and the tiles
// it writes. Tiles are numbered over every buffer. fc2's tasks, and every slice of a split GEMM,
// leave out the read of their own output tiles: the slice that completes a tile reads it once all
// slices have arrived.
struct TileUses {
  int tiles = 0;
  std::vector<int> read_begin;   // task i reads read_tile[read_begin[i] .. read_begin[i + 1])
  std::vector<int> read_tile;
  std::vector<unsigned> read_expect;
  std::vector<int> write_begin;  // likewise for its writes
  std::vector<int> write_tile;
  std::vector<unsigned> final_writes;  // per tile, after one forward
};
TileUses tile_uses(const Schedule& sched);

}  // namespace encoder::tiles
