//! The layer order of `src/` (docs/architecture.md): every module path (`crate::X`, and
//! `super::`/`self::` paths that reach another top-level module), in `use` lines and
//! inline, comments and string literals excluded, must name a module on a row below the
//! importing module's own, or the same module; modules on one row must not import each
//! other in a loop. A row's entry is a top-level module or a module inside one
//! (`kafka::system`, a system's side of the harness's seam, sits above `sim` while the
//! rest of `kafka` sits below `scenario`); a file belongs to the longest entry its path
//! starts with. A new top-level module must be given a row here. The broker systems stand
//! side by side and never import each other, not even one way. Inside a module, the files
//! of one folder must not import each other in a loop either.

use super::source::{code_only, paths, source_files, Root, SourceFile};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top to bottom. A module may import any module on a lower row.
const LAYERS: &[&[&str]] = &[
    &["lab", "cli"],
    &["report", "shrink"],
    &["systems"],
    &["kafka::system", "rocketmq::system"],
    &["sim"],
    &["scenario"],
    &["kafka", "rocketmq"],
    &["check"],
    &["history"],
    &["os"],
    &["types", "config"],
];

/// The broker systems: each may import what lies below it, never another system.
const SYSTEMS: &[&str] = &["kafka", "rocketmq"];

fn row_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// The entry of `LAYERS` a module path belongs to: the longest one it starts with, or its
/// top-level module when none does.
fn unit_of(path: &[String]) -> Option<String> {
    let joined = path.join("::");
    LAYERS
        .iter()
        .flat_map(|row| row.iter())
        .filter(|entry| joined == **entry || joined.starts_with(&format!("{entry}::")))
        .max_by_key(|entry| entry.len())
        .map(|entry| entry.to_string())
        .or_else(|| path.first().cloned())
}

/// The system a layer unit belongs to, if any (`kafka::system` is Kafka's).
fn system_of(unit: &str) -> Option<&'static str> {
    let top = unit.split("::").next()?;
    SYSTEMS.iter().copied().find(|s| *s == top)
}

/// Each module's imports of other modules: importer → imported → first place seen.
type Imports = BTreeMap<String, BTreeMap<String, String>>;

fn imports_of(files: &[SourceFile]) -> Imports {
    let mut imports = Imports::new();
    for file in files {
        let Some(module) = unit_of(&file.module) else {
            continue;
        };
        for path in paths(&file.code) {
            let Some(target) = path.resolve(&file.module) else {
                continue;
            };
            let Some(top) = unit_of(&target) else {
                continue;
            };
            if top != module {
                imports
                    .entry(module.clone())
                    .or_default()
                    .entry(top.clone())
                    .or_insert_with(|| format!("{}:{}", file.name, path.line));
            }
        }
    }
    imports
}

/// Every import that breaks the order, as a sentence naming the file and line.
fn violations(imports: &Imports) -> Vec<String> {
    let mut found = Vec::new();
    for (module, targets) in imports {
        let Some(row) = row_of(module) else {
            found.push(format!("module `{module}` has no row in LAYERS"));
            continue;
        };
        for (target, place) in targets {
            if let (Some(from), Some(to)) = (system_of(module), system_of(target)) {
                if from != to {
                    found.push(format!(
                        "{place}: `{module}` imports `{target}`: one system never imports another"
                    ));
                    continue;
                }
            }
            match row_of(target) {
                None => found.push(format!("{place}: `{module}` imports `{target}`, which has no row in LAYERS")),
                Some(r) if r < row => found.push(format!(
                    "{place}: `{module}` imports `{target}`, a higher layer"
                )),
                Some(r) if r == row && reaches(imports, target, module) => found.push(format!(
                    "{place}: `{module}` imports `{target}` and `{target}` imports `{module}`, on the same row"
                )),
                Some(_) => {}
            }
        }
    }
    found
}

/// Whether `from` imports `to`, directly or through modules of its own row.
fn reaches(imports: &Imports, from: &str, to: &str) -> bool {
    let row = row_of(from);
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(module) = stack.pop() {
        if module == to {
            return true;
        }
        if !seen.insert(module.clone()) {
            continue;
        }
        for target in imports.get(&module).into_iter().flat_map(BTreeMap::keys) {
            if row_of(target) == row {
                stack.push(target.clone());
            }
        }
    }
    false
}

/// A loop between modules that share a parent (`report::svg` → `report::sweep` →
/// `report::svg`), each step with the place it is written. A file in a subfolder counts
/// as its folder at the folder's own level (`scenario::parse::faults` → `scenario::keys`
/// is `scenario::parse` → `scenario::keys`); the parent's `mod.rs` is not a sibling.
fn sibling_loops(files: &[SourceFile]) -> Vec<String> {
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|f| (1..=f.module.len()).map(|k| f.module[..k].to_vec()))
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
    for file in files {
        for path in paths(&file.code) {
            let Some(target) = path.resolve(&file.module) else {
                continue;
            };
            for k in 2..=file.module.len().min(target.len()) {
                let (from, to) = (&file.module[..k], &target[..k]);
                if from[..k - 1] == to[..k - 1] && from != to && modules.contains(to) {
                    edges
                        .entry(from.to_vec())
                        .or_default()
                        .entry(to.to_vec())
                        .or_insert_with(|| format!("{}:{}", file.name, path.line));
                }
            }
        }
    }
    let mut loops = Vec::new();
    let mut reported = BTreeSet::new();
    for start in edges.keys() {
        if let Some(cycle) = cycle_through(&edges, start) {
            let members: BTreeSet<_> = cycle.iter().cloned().collect();
            if !reported.insert(members) {
                continue;
            }
            let steps: Vec<String> = cycle
                .iter()
                .zip(cycle.iter().cycle().skip(1))
                .map(|(a, b)| {
                    format!(
                        "{} imports {} ({})",
                        a.join("::"),
                        b.join("::"),
                        edges[a][b]
                    )
                })
                .collect();
            loops.push(steps.join("; "));
        }
    }
    loops
}

/// A shortest cycle from `start` back to itself, if there is one.
fn cycle_through(
    edges: &BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>>,
    start: &Vec<String>,
) -> Option<Vec<Vec<String>>> {
    let mut came_from: BTreeMap<&Vec<String>, &Vec<String>> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(module) = queue.pop_front() {
        for next in edges.get(module).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut cycle = vec![module.clone()];
                let mut at = module;
                while at != start {
                    at = came_from[at];
                    cycle.push(at.clone());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, module);
                queue.push_back(next);
            }
        }
    }
    None
}

fn src_files() -> Vec<SourceFile> {
    source_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_module_imports_a_higher_layer() {
    let found = violations(&imports_of(&src_files()));
    assert!(
        found.is_empty(),
        "layer order broken:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_files_of_a_folder_do_not_import_each_other_in_a_loop() {
    let found = sibling_loops(&src_files());
    assert!(found.is_empty(), "import loops:\n{}", found.join("\n"));
}

#[test]
fn every_top_level_module_has_a_row() {
    let missing: BTreeSet<String> = src_files()
        .into_iter()
        .filter_map(|f| unit_of(&f.module))
        .filter(|module| row_of(module).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a row in LAYERS: {missing:?}"
    );
}

fn file(module: &str, code: &str) -> SourceFile {
    SourceFile {
        module: module.split("::").map(str::to_owned).collect(),
        name: format!("src/{}.rs", module.replace("::", "/")),
        code: code_only(code),
    }
}

#[test]
fn paths_are_found_in_use_lines_groups_and_inline() {
    let code = code_only(
        "use crate::os::disk::Disk;\nuse crate::{types::Offset,\n  storage::{log, segment as seg}};\nlet t = crate::os::clock::now();\nuse super::super::{self, x::*};\n",
    );
    let found: Vec<(usize, Root, String)> = paths(&code)
        .into_iter()
        .map(|p| (p.line, p.root, p.segments.join("::")))
        .collect();
    let expected = [
        (1, Root::Crate, "os::disk::Disk"),
        (2, Root::Crate, "types::Offset"),
        (2, Root::Crate, "storage::log"),
        (2, Root::Crate, "storage::segment"),
        (4, Root::Crate, "os::clock::now"),
        (5, Root::Super(2), ""),
        (5, Root::Super(2), "x"),
    ];
    let expected: Vec<(usize, Root, String)> = expected
        .iter()
        .map(|&(l, r, p)| (l, r, p.to_string()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn comments_strings_and_test_modules_are_not_references() {
    let code = code_only(
        "// use crate::sim;\n/* crate::cli */ let s = \"crate::report\"; let r = r#\"crate::sim\"#;\nlet c = '\"'; /// crate::cli\nfn f<'a>(x: &'a str) {}\n#[cfg(test)]\nmod tests {\n    use super::super::cli;\n}\n",
    );
    assert_eq!(paths(&code), Vec::new());
    assert_eq!(code.lines().count(), 8, "line numbers survive blanking");
}

#[test]
fn super_paths_resolve_against_the_file_module() {
    let files = [
        file(
            "kafka::storage::log",
            "use super::super::super::sim::runner;",
        ),
        file("os", "fn f() { super::cli::run(); }"),
    ];
    let found = violations(&imports_of(&files));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("src/kafka/storage/log.rs:1: `kafka` imports `sim`, a higher layer"));
    assert!(found[1].contains("src/os.rs:1: `os` imports `cli`, a higher layer"));
}

#[test]
fn an_upward_import_and_a_same_row_loop_are_reported() {
    let files = [
        file("kafka::storage::log", "use crate::sim::world::World;"),
        file("report::run", "use crate::shrink::passes;"),
        file("shrink::passes", "use crate::report::run;"),
        file("check::sends", "use crate::history::Event;"),
    ];
    let found = violations(&imports_of(&files));
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("src/kafka/storage/log.rs:1: `kafka` imports `sim`, a higher layer"));
    assert!(found[1].contains("`report` imports `shrink` and `shrink` imports `report`"));
}

#[test]
fn a_loop_between_the_files_of_a_folder_is_reported() {
    let files = [
        file("report", "mod svg; mod sweep; pub use svg::chart;"),
        file("report::svg", "use super::sweep::SweepRow;"),
        file("report::sweep", "use super::svg;\nuse super::Unrelated;"),
        file("report::run", "use crate::report::svg::chart;"),
        file("scenario::parse", "mod faults;"),
        file("scenario::parse::faults", "use crate::scenario::keys::Key;"),
        file("scenario::keys", "use super::parse::faults::x;"),
    ];
    let found = sibling_loops(&files);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(
        found[0],
        "report::svg imports report::sweep (src/report/svg.rs:1); report::sweep imports report::svg (src/report/sweep.rs:1)"
    );
    assert!(found[1]
        .contains("scenario::parse imports scenario::keys (src/scenario/parse/faults.rs:1)"));
}

#[test]
fn a_system_imports_no_other_system() {
    let files = [
        file(
            "rocketmq::store::commit_log",
            "use crate::kafka::record::BatchBuilder;",
        ),
        file("rocketmq::system", "use crate::kafka::system::Kafka;"),
        file(
            "kafka::broker::fetcher",
            "use crate::kafka::storage::log::Log;",
        ),
        file("kafka::storage::log", "use crate::check::Counts;"),
    ];
    let found = violations(&imports_of(&files));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains(
        "src/rocketmq/store/commit_log.rs:1: `rocketmq` imports `kafka`: one system never imports another"
    ));
    assert!(found[1].contains(
        "src/rocketmq/system.rs:1: `rocketmq::system` imports `kafka::system`: one system never imports another"
    ));
}

#[test]
fn only_a_systems_side_of_the_seam_sees_the_harness() {
    let files = [
        file("kafka::system", "use crate::sim::world::World;\nuse crate::scenario::model::Settings;\nuse crate::kafka::broker;"),
        file("kafka::broker", "use crate::sim::world::World;"),
        file("sim::runner", "use crate::kafka::system::Kafka;"),
    ];
    let found = violations(&imports_of(&files));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("src/kafka/broker.rs:1: `kafka` imports `sim`, a higher layer"));
    assert!(found[1].contains("src/sim/runner.rs:1: `sim` imports `kafka::system`, a higher layer"));
}
