// The tile-scheduled forward's schedule on the CPU: sound for every model and size the study
// runs, its counts what the design says (stages/encoder/NOTES.md), and every planted fault (a wait
// one short, a wait dropped, a task dealt before its inputs, one QKV buffer for every block,
// final counts off by one) found by check with a message naming it; at batch 256 the counts alone.
#include <doctest/doctest.h>
#include <algorithm>
#include <stdexcept>
#include <string>
#include "encoder/tile_schedule.hpp"

using namespace encoder::tiles;

namespace {

Shape vit(int hidden, int blocks, int tokens, int images = 1, int split = 3, bool ln_tasks = false) {
  return vit_shape(hidden, blocks, tokens, images, split, ln_tasks);
}

int count(const Schedule& sched, Kind k, int block) {
  int n = 0;
  for (const Task& t : sched.tasks) n += t.kind == k && t.block == block;
  return n;
}

Task& first(Schedule& sched, Kind k, int block) {
  for (Task& t : sched.tasks)
    if (t.kind == k && t.block == block) return t;
  throw std::logic_error("no such task");
}

const Task& first(const Schedule& sched, Kind k, int block) {
  for (const Task& t : sched.tasks)
    if (t.kind == k && t.block == block) return t;
  throw std::logic_error("no such task");
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("the schedule is sound for vit_ti to vit_b, 1 to 3 images, 224 and 384 px, fc2 split 1 to 4") {
  for (bool ln_tasks : {false, true})
    for (int hidden : {192, 384, 768})
      for (int tokens : {197, 577})
        for (int images : {1, 3})
          for (int split : {1, 2, 3, 4}) {
            if (tokens == 577 && images == 3 && hidden == 768) continue;  // the largest adds nothing but time
            CAPTURE(ln_tasks);
            CAPTURE(hidden);
            CAPTURE(tokens);
            CAPTURE(images);
            CAPTURE(split);
            const Schedule sched = build(vit(hidden, 3, tokens, images, split, ln_tasks));
            CHECK(check(sched) == "");
          }
}

TEST_CASE("LayerNorm tasks: one per row tile and LayerNorm, and the GEMMs after them wait for them alone") {
  const Schedule sched = build(vit(768, 12, 197, 1, 4, true));
  REQUIRE(check(sched) == "");
  for (int b : {0, 11}) {
    CHECK(count(sched, Kind::Ln1, b) == 4);
    CHECK(count(sched, Kind::Ln2, b) == 4);
    CHECK(count(sched, Kind::Qkv, b) == 4 * 36);
  }
  CHECK(sched.tasks.size() == 12u * (4 * (1 + 36 + 12 + 12 + 1 + 48 + 12 * 4)));
  for (const Task& t : sched.tasks) {
    if (t.kind != Kind::Qkv && t.kind != Kind::Fc1) continue;
    REQUIRE(t.waits.size() == 1u);
    CHECK(t.waits[0].target == 1u);
    CHECK(sched.counter_names[t.waits[0].counter].find(t.kind == Kind::Qkv ? "LN1" : "LN2") != std::string::npos);
  }
  // The same forward without them: the counters of the design, none for LayerNorms.
  CHECK(build(vit(768, 12, 197, 1, 4)).final_counts.size() + 12u * 2 * 4 == sched.final_counts.size());
}

TEST_CASE("vit_b at batch 1: the tasks and counts of the design") {
  Schedule sched = build(vit(768, 12, 197));
  REQUIRE(check(sched) == "");
  CHECK(sched.row_tiles == 4);
  for (int b : {0, 11}) {
    CHECK(count(sched, Kind::Qkv, b) == 4 * 36);
    CHECK(count(sched, Kind::Attention, b) == 4 * 12);
    CHECK(count(sched, Kind::Projection, b) == 4 * 12);
    CHECK(count(sched, Kind::Fc1, b) == 4 * 48);
    CHECK(count(sched, Kind::Fc2, b) == 4 * 12 * 3);
  }
  CHECK(sched.tasks.size() == 12u * (144 + 48 + 48 + 192 + 144));
  // Every counter ends where a complete forward leaves it, and only block 0's QKV waits on nothing.
  unsigned total = 0;
  for (unsigned c : sched.final_counts) total += c;
  CHECK(total == sched.tasks.size());
  for (const Task& t : sched.tasks) CHECK((t.waits.empty()) == (t.kind == Kind::Qkv && t.block == 0));
  // Attention waits for its Q tile and its head's K and V in the four row tiles (8 tiles).
  const Task& a = first(sched, Kind::Attention, 5);
  REQUIRE(a.waits.size() == 2);
  CHECK(a.waits[0].target == 1);
  CHECK(a.waits[1].target == 8);
  CHECK(sched.final_counts[a.waits[1].counter] == 8);
}

TEST_CASE("the table the GPU reads: the proven schedule entry by entry, and proved itself") {
  for (bool ln_tasks : {false, true})
    for (int images : {1, 3}) {
      const Schedule sched = build(vit(768, 12, 197, images, 4, ln_tasks));
      CAPTURE(images);
      CAPTURE(ln_tasks);
      const std::vector<DeviceTask> table = device_tasks(sched);
      CHECK(table_differs(sched, table) == "");
      const Schedule read = from_device(sched, table);
      REQUIRE(read.tasks.size() == sched.tasks.size());
      for (std::size_t i = 0; i < read.tasks.size(); ++i) {
        const Task &a = read.tasks[i], &b = sched.tasks[i];
        CHECK((a.kind == b.kind && a.block == b.block && a.row_tile == b.row_tile && a.col == b.col &&
               a.slice == b.slice && a.signals == b.signals && a.waits.size() == b.waits.size()));
        for (std::size_t w = 0; w < a.waits.size(); ++w)
          CHECK((a.waits[w].counter == b.waits[w].counter && a.waits[w].target == b.waits[w].target));
      }
      if (images == 1) CHECK(check(read) == "");
    }
  // Each corruption of one entry is named by the comparison, and the ordering proof of the table
  // read back finds the ones that break an order.
  const Schedule sched = build(vit(384, 3, 197));
  const std::vector<DeviceTask> table = device_tasks(sched);
  std::size_t attn = 0;
  while (sched.tasks[attn].kind != Kind::Attention) ++attn;
  auto t = table;
  --t[attn].wait_target[1];
  CHECK(contains(table_differs(sched, t), ("ticket " + std::to_string(attn) + " (attention of block 0): waits for").c_str()));
  CHECK(contains(check(from_device(sched, t)), "not ordered"));
  t = table;
  std::swap(t[attn], t[attn + 1]);
  CHECK(contains(table_differs(sched, t), "another task"));
  t = table;
  ++t[attn].signals;
  CHECK(contains(table_differs(sched, t), "signals counter"));
  t = table;
  t[attn].waits = 1;
  CHECK(contains(table_differs(sched, t), "1 waits, not 2"));
  t = table;
  t.pop_back();
  CHECK(contains(table_differs(sched, t), "holds"));
  t = table;
  t[attn].waits = 3;
  CHECK_THROWS_WITH_AS(from_device(sched, t), doctest::Contains("not 0 to 2 waits"), std::invalid_argument);
  t = table;
  t[attn].kind = 9;
  CHECK_THROWS_WITH_AS(from_device(sched, t), doctest::Contains("no task kind"), std::invalid_argument);
  t = table;
  t[attn].wait_counter[0] = static_cast<int>(sched.final_counts.size());
  CHECK_THROWS_WITH_AS(from_device(sched, t), doctest::Contains("out of range"), std::invalid_argument);
}

TEST_CASE("planted faults: check names each") {
  const Shape shape = vit(384, 3, 197);
  REQUIRE(check(build(shape)) == "");
  // check's verdict on the schedule of `shape` after `plant` changed it.
  const auto planted = [&](const auto& plant) {
    Schedule s = build(shape);
    plant(s);
    return check(s);
  };

  SUBCASE("attention waits for one K/V tile too few") {
    const std::string f = planted([](Schedule& s) { first(s, Kind::Attention, 1).waits[1].target -= 1; });
    CHECK(contains(f, "attention of block 1, rows 0, head 0 is not ordered after qkv of block 1"));
  }
  SUBCASE("attention without its Q tile") {
    const std::string f = planted([](Schedule& s) {
      auto& waits = first(s, Kind::Attention, 2).waits;
      waits.erase(waits.begin());
    });
    CHECK(contains(f, "attention of block 2, rows 0, head 0 is not ordered after qkv of block 2, rows 0, columns 0"));
  }
  SUBCASE("the projection waits for one head too few") {
    const std::string f = planted([](Schedule& s) { first(s, Kind::Projection, 0).waits[0].target -= 1; });
    CHECK(contains(f, "projection of block 0, rows 0, columns 0 is not ordered after attention"));
  }
  SUBCASE("fc2 without its wait for fc1") {
    const std::string f = planted([](Schedule& s) { first(s, Kind::Fc2, 1).waits.clear(); });
    CHECK(contains(f, "fc2 of block 1, rows 0, columns 0, slice 0 is not ordered after fc1"));
  }
  SUBCASE("the next block's QKV waits for one fc2 slice too few") {
    const std::string f = planted([](Schedule& s) { first(s, Kind::Qkv, 2).waits[0].target -= 1; });
    CHECK(contains(f, "qkv of block 2, rows 0, columns 0 is not ordered after fc2 of block 1"));
  }
  SUBCASE("one QKV buffer for every block: the next block overwrites keys still read") {
    Shape one = shape;
    one.qkv_buffers = 1;
    CHECK(contains(check(build(one)), "overwrites a tile the other reads"));
  }
  SUBCASE("a wait for more than a forward adds deadlocks") {
    CHECK(contains(planted([](Schedule& s) { first(s, Kind::Fc1, 1).waits[0].target += 1; }), "could wait forever"));
  }
  SUBCASE("a task dealt out before its inputs deadlocks") {
    Schedule s = build(shape);
    auto at = [&](Kind k) {
      return std::find_if(s.tasks.begin(), s.tasks.end(), [&](const Task& t) { return t.kind == k && t.block == 1; });
    };
    const auto projection = at(Kind::Projection);
    std::rotate(at(Kind::Attention), projection, projection + 1);  // dealt out before the attention it reads
    CHECK(contains(check(s), "projection of block 1, rows 0, columns 0 (ticket"));
  }
  SUBCASE("LayerNorm tasks: QKV reads the normalized rows before LN1 wrote them") {
    Schedule s = build(vit(384, 3, 197, 1, 3, true));
    first(s, Kind::Qkv, 1).waits.clear();
    CHECK(contains(check(s), "qkv of block 1, rows 0, columns 0 is not ordered after ln1 of block 1, rows 0"));
  }
  SUBCASE("LayerNorm tasks: LN2 overwrites the normalized rows QKV still reads") {
    Schedule s = build(vit(384, 3, 197, 1, 3, true));
    first(s, Kind::Ln2, 1).waits.clear();
    CHECK(contains(check(s), "ln2 of block 1, rows 0 is not ordered after"));
  }
  SUBCASE("final counts one off") {
    CHECK(contains(planted([](Schedule& s) { s.final_counts[3] += 1; }), "a forward adds"));
  }
}

TEST_CASE("shapes the schedule cannot describe are refused") {
  CHECK(refuses(vit(768, 12, 197)) == "");
  Shape s = vit(768, 12, 197);
  s.heads = 16;  // 48-wide heads
  CHECK(contains(refuses(s), "64 columns"));
  s = vit(768, 12, 197);
  s.fc2_split = 5;
  CHECK(contains(refuses(s), "fc2_split"));
  s = vit(768, 0, 197);
  CHECK(contains(refuses(s), "positive"));
  s = vit(768, 12, 0);
  CHECK(contains(refuses(s), "positive"));
  s = vit(768, 12, 197);
  s.mlp_hidden = 3000;
  CHECK(contains(refuses(s), "mlp_hidden"));
  CHECK_THROWS_AS(build(s), std::invalid_argument);
}

TEST_CASE("what each task touches: the writes a tile has had before it, in program order") {
  const Schedule sched = build(vit(384, 3, 197, 1, 2));
  const TileUses u = tile_uses(sched);
  REQUIRE(u.read_begin.size() == sched.tasks.size() + 1);
  auto reads_of = [&](std::size_t i) {
    std::vector<unsigned> e(u.read_expect.begin() + u.read_begin[i], u.read_expect.begin() + u.read_begin[i + 1]);
    return e;
  };
  for (std::size_t i = 0; i < sched.tasks.size(); ++i) {
    const Task& t = sched.tasks[i];
    CAPTURE(i);
    const auto e = reads_of(i);
    if (t.kind == Kind::Qkv) {  // x after t.block blocks: one projection write and 2 fc2 slices each
      REQUIRE(e.size() == 6u);
      for (unsigned v : e) CHECK(v == 3u * t.block);
    }
    if (t.kind == Kind::Attention) {  // Q once, then K and V of 4 row tiles, each written once per
      // use of its buffer (two buffers, in turn)
      REQUIRE(e.size() == 1u + 2 * 4);
      for (unsigned v : e) CHECK(v == static_cast<unsigned>(t.block / 2 + 1));
    }
    if (t.kind == Kind::Fc2) {  // its slice of h: 12 of 24 tiles, written by this block's fc1
      REQUIRE(e.size() == 12u);
      for (unsigned v : e) CHECK(v == static_cast<unsigned>(t.block + 1));
    }
    CHECK(u.write_begin[i + 1] - u.write_begin[i] == 1);
  }
  // The residual stream's tiles: 3 writes a block; each QKV buffer's tiles once per block that used it.
  CHECK(u.final_writes[0] == 9u);
}

TEST_CASE("vit_b at batch 256: too many tasks for the ordering proof, the counts proved alone") {
  // The tile form's forward at the batches timm parity runs (256 images) proves only the counts
  // when it starts: the ordering proof's bitsets would need ~270 GB here.
  Schedule sched = build(vit(768, 12, 197, 256));
  CHECK(sched.tasks.size() > kOrderProofMaxTasks);
  CHECK(check_counts(sched) == "");
  SUBCASE("a wait no smaller ticket reaches") {
    first(sched, Kind::Fc1, 7).waits[0].target += 1;
    CHECK(contains(check_counts(sched), "could wait forever"));
  }
  SUBCASE("final counts one off") {
    sched.final_counts[5] -= 1;
    CHECK(contains(check_counts(sched), "a forward adds"));
  }
}

TEST_CASE("the forward proves the ordering up to batch 8 (vit_b 224 px) and at every shape its GPU tests run") {
  CHECK(build(vit(768, 12, 197, 8)).tasks.size() <= kOrderProofMaxTasks);
  CHECK(build(vit(768, 12, 577, 3)).tasks.size() <= kOrderProofMaxTasks);
}

TEST_CASE("the read-once tiling: 256-row GEMM tasks, K split so that 132 CTAs have work") {
  const Shape s = read_once_shape(768, 12, 197, 1, 132);
  CHECK(s.gemm_rows == 4);
  // The fewest slices giving 132 tasks: QKV 36 columns x 4, the projection 12 x 12, fc1 48 x 3,
  // fc2 12 x 12 (of its 48 K tiles).
  CHECK((s.qkv_split == 4 && s.proj_split == 12 && s.fc1_split == 3 && s.fc2_split == 12));
  const Schedule sched = build(s);
  REQUIRE(check(sched) == "");
  CHECK(sched.row_tiles == 4);
  CHECK(sched.row_groups == 1);
  for (int b : {0, 11}) {
    CHECK(count(sched, Kind::Qkv, b) == 144);
    CHECK(count(sched, Kind::Attention, b) == 48);  // 64 queries of one head, as before
    CHECK(count(sched, Kind::Projection, b) == 144);
    CHECK(count(sched, Kind::Fc1, b) == 144);
    CHECK(count(sched, Kind::Fc2, b) == 144);
  }
  // Each weight tile is read by one task: QKV column 5's four slices read K rows 0-191, 192-383...
  // of the whole row group, and write the same output tiles.
  const Task& a = first(sched, Kind::Attention, 3);
  REQUIRE(a.waits.size() == 2u);
  CHECK(a.waits[0].target == 4u);  // its Q tile's four slices
  CHECK(a.waits[1].target == 8u);  // K and V of its head: one row group, four slices each
  CHECK(first(sched, Kind::Projection, 3).waits[0].target == 48u);  // 12 heads x 4 tiles
  CHECK(first(sched, Kind::Fc1, 3).waits[0].target == 144u);
  CHECK(first(sched, Kind::Fc2, 3).waits[0].target == 144u);
  CHECK(first(sched, Kind::Qkv, 3).waits[0].target == 144u);  // block 2's fc2
  // The table the GPU reads holds row groups for the GEMMs and row tiles for attention.
  const std::vector<DeviceTask> table = device_tasks(sched);
  CHECK(table_differs(sched, table) == "");
  CHECK(check(from_device(sched, table)) == "");
  // More images: 256-row groups, the last partial (3 x 197 = 591 rows, 10 row tiles, 3 groups).
  const Schedule three = build(read_once_shape(768, 2, 197, 3, 132));
  CHECK(three.row_groups == 3);
  CHECK(check(three) == "");
  CHECK(first(three, Kind::Projection, 1).waits[0].target == 48u);
}

TEST_CASE("the read-once tiling is sound for vit_ti to vit_b, 1 to 3 images, 224 and 384 px, 66 to 264 CTAs") {
  for (int hidden : {192, 384, 768})
    for (int tokens : {197, 577})
      for (int images : {1, 3})
        for (int ctas : {66, 132, 264})
          for (int max_chunks : {0, 8}) {
            const Shape s = read_once_shape(hidden, 3, tokens, images, ctas, max_chunks);
            CAPTURE(hidden);
            CAPTURE(tokens);
            CAPTURE(images);
            CAPTURE(ctas);
            CAPTURE(max_chunks);
            REQUIRE(refuses(s) == "");
            const Schedule sched = build(s);
            CHECK(check(sched) == "");
            CHECK(table_differs(sched, device_tasks(sched)) == "");
          }
}

TEST_CASE("the read-once tiling with slices of at most 8 chunks: batch 1 as without, more slices where K is wide") {
  const Shape one = read_once_shape(768, 12, 197, 1, 132, 8);
  CHECK((one.qkv_split == 4 && one.proj_split == 12 && one.fc1_split == 3 && one.fc2_split == 12));
  // 3 images: 3 row groups, so 3 slices of fc1 and 4 of QKV would do for 132 CTAs, but fc2's 48 K
  // tiles need 6 slices of 8 where 4 would have given 132 tasks; QKV's 12 need 2.
  const Shape three = read_once_shape(768, 12, 197, 3, 132, 8);
  const Shape free = read_once_shape(768, 12, 197, 3, 132);
  CHECK(free.fc2_split == 4);
  CHECK(three.fc2_split == 6);
  for (const Shape& s : {one, three}) {
    CHECK(768 / 64 / s.qkv_split <= 8);
    CHECK(768 / 64 / s.proj_split <= 8);
    CHECK(768 / 64 / s.fc1_split <= 8);
    CHECK(4 * 768 / 64 / s.fc2_split <= 8);
  }
  // 256 images: every GEMM has tasks enough unsplit, but slices stay at most 8 chunks wide.
  const Shape many = read_once_shape(768, 12, 197, 256, 132, 8);
  CHECK((many.qkv_split == 2 && many.proj_split == 2 && many.fc1_split == 2 && many.fc2_split == 6));
}

TEST_CASE("planted faults in the read-once tiling: check names each") {
  const Shape shape = read_once_shape(384, 3, 197, 1, 132);
  REQUIRE(check(build(shape)) == "");
  const auto planted = [&](const auto& plant) {
    Schedule s = build(shape);
    plant(s);
    return check(s);
  };
  SUBCASE("attention waits for one QKV slice of its Q tile too few") {
    CHECK(contains(planted([](Schedule& s) { first(s, Kind::Attention, 1).waits[0].target -= 1; }),
                   "attention of block 1, rows 0, head 0 is not ordered after qkv of block 1, rows 0-3, columns 0, "
                   "slice"));
  }
  SUBCASE("the projection waits for one attention task too few") {
    CHECK(contains(planted([](Schedule& s) { first(s, Kind::Projection, 2).waits[0].target -= 1; }),
                   "projection of block 2, rows 0-3, columns 0, slice 0 is not ordered after attention of block 2"));
  }
  SUBCASE("fc2 waits for one fc1 slice too few") {
    CHECK(contains(planted([](Schedule& s) { first(s, Kind::Fc2, 0).waits[0].target -= 1; }),
                   "fc2 of block 0, rows 0-3, columns 0, slice 0 is not ordered after fc1 of block 0"));
  }
  SUBCASE("the next block's QKV waits for one fc2 slice too few") {
    CHECK(contains(planted([](Schedule& s) { first(s, Kind::Qkv, 1).waits[0].target -= 1; }),
                   "qkv of block 1, rows 0-3, columns 0, slice 0 is not ordered after fc2 of block 0"));
  }
  SUBCASE("a slice that never runs: the tile's readers wait forever") {
    Schedule s = build(shape);
    const auto it = std::find_if(s.tasks.begin(), s.tasks.end(),
                                 [](const Task& t) { return t.kind == Kind::Fc1 && t.block == 1; });
    s.final_counts[it->signals] -= 1;
    s.tasks.erase(it);
    CHECK(contains(check(s), "could wait forever"));
  }
}

TEST_CASE("the read-once tiling: what each task touches") {
  // vit_s: no split of its 6 K tiles gives 132 QKV, projection or fc1 tasks, so each takes every
  // slice (6); fc2 24 of its 24.
  const Schedule sched = build(read_once_shape(384, 3, 197, 1, 132));
  REQUIRE((sched.shape.qkv_split == 6 && sched.shape.proj_split == 6 && sched.shape.fc1_split == 6 &&
           sched.shape.fc2_split == 24));
  const TileUses u = tile_uses(sched);
  for (std::size_t i = 0; i < sched.tasks.size(); ++i) {
    const Task& t = sched.tasks[i];
    CAPTURE(i);
    const int reads = u.read_begin[i + 1] - u.read_begin[i], writes = u.write_begin[i + 1] - u.write_begin[i];
    if (t.kind == Kind::Qkv) {  // whole rows of x in 4 row tiles (their statistics), whatever its slice
      CHECK(reads == 4 * 6);
      for (int k = u.read_begin[i]; k < u.read_begin[i + 1]; ++k) CHECK(u.read_expect[k] == 30u * t.block);
    }
    if (t.kind == Kind::Fc2) {  // its slice of h (one of 24 columns) in 4 row tiles; not its own output
      CHECK(reads == 4);
      CHECK(writes == 4);
    }
    if (t.kind == Kind::Projection) CHECK(reads == 4 * 1);  // one column of the attention output a slice
    if (t.kind == Kind::Attention) CHECK(writes == 1);
  }
  // A residual stream tile: the projection's 6 slices and fc2's 24 in each of 3 blocks.
  CHECK(u.final_writes[0] == 90u);
}

TEST_CASE("the read-once tiling's shapes the schedule refuses") {
  Shape s = read_once_shape(768, 12, 197, 1, 132);
  s.ln_tasks = true;
  CHECK(contains(refuses(s), "LayerNorm tasks need 64-row GEMM tasks"));
  s = read_once_shape(768, 12, 197, 1, 132);
  s.proj_split = 5;
  CHECK(contains(refuses(s), "proj_split"));
  s.proj_split = 1;
  s.gemm_rows = 0;
  CHECK(contains(refuses(s), "gemm_rows"));
}
