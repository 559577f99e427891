//! The layer order of `src/` (docs/architecture.md): every `crate::X` path, in `use` lines
//! and inline, comments and string literals excluded, must name a module on a row below
//! the importing module's own, or the same module; modules on one row must not import each
//! other in a loop. A new top-level module must be given a row here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top to bottom. A module may import any module on a lower row.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["report"],
    &["sim"],
    &["scenario"],
    &["broker", "controller", "client"],
    &["check"],
    &["storage"],
    &["protocol", "record", "history"],
    &["os"],
    &["types", "config"],
];

/// Files that are the crate's roots, not modules of a layer.
const ROOTS: &[&str] = &["lib", "main"];

fn row_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// The source with comments and the contents of string and char literals blanked out, so
/// that what remains is code. Line structure is kept, so line numbers stay right.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let keep_newlines = |text: &[char], out: &mut String| {
        out.extend(text.iter().filter(|&&c| c == '\n'));
    };
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            let end = rest.iter().position(|&c| c == '\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            keep_newlines(&rest[..j.min(rest.len())], &mut out);
            i += j;
        } else if let Some(len) = raw_string_len(rest) {
            keep_newlines(&rest[..len], &mut out);
            out.push_str("\"\"");
            i += len;
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            let len = (j + 1).min(rest.len());
            keep_newlines(&rest[..len], &mut out);
            out.push_str("\"\"");
            i += len;
        } else if rest[0] == '\'' && char_literal_len(rest).is_some() {
            out.push_str("' '");
            i += char_literal_len(rest).unwrap_or(1);
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

/// `r"…"`, `r#"…"#`, `br"…"`: the literal's length, if one starts here.
fn raw_string_len(text: &[char]) -> Option<usize> {
    let start = match text {
        ['r', ..] => 1,
        ['b', 'r', ..] => 2,
        _ => return None,
    };
    let hashes = text[start..].iter().take_while(|&&c| c == '#').count();
    if text.get(start + hashes) != Some(&'"') {
        return None;
    }
    let body = start + hashes + 1;
    let closing: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (body..text.len())
        .find(|&j| text[j..].starts_with(&closing))
        .map(|j| j + closing.len())
}

/// `'x'`, `'\n'`, `'\''`, `'\u{1F600}'`: the literal's length; `None` for a lifetime.
fn char_literal_len(text: &[char]) -> Option<usize> {
    match text {
        ['\'', '\\', 'u', '{', ..] => text.iter().position(|&c| c == '}').map(|p| p + 2),
        ['\'', '\\', _, '\'', ..] => Some(4),
        ['\'', c, '\'', ..] if *c != '\\' => Some(3),
        _ => None,
    }
}

/// Every module named by a `crate::` path in the code, with its line: `crate::a::b`,
/// `crate::{a, b::c}`.
fn crate_references(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line_start) in line_starts(code).into_iter().enumerate() {
        let line_end = code[line_start..]
            .find('\n')
            .map_or(code.len(), |p| line_start + p);
        let mut rest = &code[line_start..line_end];
        while let Some(at) = rest.find("crate::") {
            let preceded_by_ident = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
            let after = &rest[at + "crate::".len()..];
            rest = after;
            if preceded_by_ident {
                continue;
            }
            if let Some(group) = after.strip_prefix('{') {
                // A group may span lines: read it from the whole code.
                let offset = code.len() - code[line_start..].len()
                    + (code[line_start..line_end].len() - group.len());
                for name in group_heads(&code[offset..]) {
                    found.push((number + 1, name));
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((number + 1, name));
                }
            }
        }
    }
    found
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i <= text.len())
        .collect()
}

/// The first segment of each path in a `use` group, from just after its `{`.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            if depth == 0 && at_item_start {
                heads.push(std::mem::take(&mut word));
            }
            word.clear();
            at_item_start = false;
        }
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            _ => {}
        }
    }
    heads
}

/// The top-level module a file of `src/` belongs to, or `None` for a crate root.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!ROOTS.contains(&name)).then(|| name.to_string())
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Each module's imports of other modules: importer → imported → first place seen.
type Imports = BTreeMap<String, BTreeMap<String, String>>;

fn imports_of(src: &Path) -> Imports {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut imports = Imports::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let Some(module) = module_of(relative) else {
            continue;
        };
        let source = std::fs::read_to_string(&file).expect("readable source");
        for (line, target) in crate_references(&code_only(&source)) {
            if target != module {
                imports
                    .entry(module.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| format!("src/{}:{line}", relative.display()));
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

#[test]
fn no_module_imports_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&imports_of(&src));
    assert!(
        found.is_empty(),
        "layer order broken:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_row() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("entry").path();
        if let Some(module) = module_of(path.strip_prefix(&src).expect("under src")) {
            if row_of(&module).is_none() {
                missing.push(module);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a row in LAYERS: {missing:?}"
    );
}

#[test]
fn references_are_found_in_use_lines_groups_and_inline_paths() {
    let code = code_only(
        "use crate::os::disk::Disk;\nuse crate::{types::Offset,\n  storage::{log, segment}};\nlet t = crate::os::clock::now();\n",
    );
    let names: Vec<(usize, String)> = crate_references(&code);
    let expected = [(1, "os"), (2, "types"), (2, "storage"), (4, "os")];
    let expected: Vec<(usize, String)> =
        expected.iter().map(|&(l, n)| (l, n.to_string())).collect();
    assert_eq!(names, expected);
}

#[test]
fn comments_and_strings_are_not_references() {
    let code = code_only(
        "// use crate::sim;\n/* crate::cli */ let s = \"crate::report\"; let r = r#\"crate::sim\"#;\nlet c = '\"'; /// crate::cli\nfn f<'a>(x: &'a str) {}\n",
    );
    assert_eq!(crate_references(&code), Vec::new());
    assert_eq!(code.lines().count(), 4, "line numbers survive blanking");
}

#[test]
fn an_upward_import_and_a_same_row_loop_are_reported() {
    let mut imports = Imports::new();
    let mut add = |from: &str, to: &str| {
        imports
            .entry(from.to_string())
            .or_default()
            .insert(to.to_string(), format!("src/{from}/x.rs:1"));
    };
    add("storage", "sim");
    add("broker", "client");
    add("client", "broker");
    add("check", "history");
    let found = violations(&imports);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("`broker` imports `client` and `client` imports `broker`"));
    assert!(found[2].contains("src/storage/x.rs:1: `storage` imports `sim`, a higher layer"));
}
