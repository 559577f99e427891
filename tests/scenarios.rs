//! Every file in `scenarios/` is a test: all its variants on its `test_seeds` (all its
//! seeds where it names none; `HIGHTIDE_SEEDS=all` runs every file's full `seeds`, and
//! `HIGHTIDE_SEEDS=SPEC` runs those seeds instead), every `[expect]` on every seed and
//! every `[expect_some]` on at least one. A failure names the scenario, the seed, the
//! expectation and the command that replays it. The harness is the library's own, the one
//! another crate gets with the same line.

fn main() {
    hightide::test_folder("scenarios")
}
