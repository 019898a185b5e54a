// The tile schedule of one forward as CSV, one line per task in ticket order: its kind, block,
// row tile, column and slice, the counter it signals and the counters it waits for
// ("counter:target ..."), as the tile-scheduled kernels read them (tile_schedule.hpp). Joined by
// ticket with a --task-times CSV written before those columns were, it gives
// experiments/probes/task_table.py the critical path (its --schedule). No GPU.
//   tile_schedule_csv [--hidden 768] [--blocks 12] [--tokens 197] [--images 1] [--ln-tasks]
#include <iostream>
#include "encoder/tile_schedule.hpp"
#include "harness/check.hpp"
#include "harness/cli.hpp"

int main(int argc, char** argv) {
  return study::run_main("tile_schedule_csv", [&] {
    int hidden = 768, blocks = 12, tokens = 197, images = 1;
    bool ln_tasks = false;
    study::Cli cli("tile_schedule_csv", "Prints the tile schedule of one forward as CSV (no GPU).");
    cli.add_int("--hidden", &hidden, "width (default 768, vit_b)");
    cli.add_int("--blocks", &blocks, "encoder blocks (default 12)");
    cli.add_int("--tokens", &tokens, "tokens an image (default 197: 224 px)");
    cli.add_int("--images", &images, "images (default 1)");
    cli.add_flag("--ln-tasks", &ln_tasks, "LayerNorm tasks (e25-e27's schedule; default e24's and e28's)");
    cli.parse(argc, argv);
    namespace tiles = encoder::tiles;
    const tiles::Shape shape = tiles::vit_shape(hidden, blocks, tokens, images, 4, ln_tasks);
    if (auto why = tiles::refuses(shape); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
    const tiles::Schedule s = tiles::build(shape);
    std::cout << "ticket,kind,block,row_tile,col,slice,signals,waits\n";
    for (std::size_t i = 0; i < s.tasks.size(); ++i) {
      const tiles::Task& t = s.tasks[i];
      std::cout << i << ',' << tiles::name(t.kind) << ',' << t.block << ',' << t.row_tile << ',' << t.col << ','
                << t.slice << ',' << t.signals << ',' << tiles::waits_text(t.waits) << '\n';
    }
    return 0;
  });
}
