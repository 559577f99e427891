//! Reading `src/` as the layer tests need it: each file's module path, its code with
//! comments and literals blanked out, and every module path it names (`crate::…`,
//! `super::…`, `self::…`, in `use` lines with their groups and inline).

use std::path::{Path, PathBuf};

/// A file of `src/`: where it sits in the module tree, and its code.
pub struct SourceFile {
    /// `src/report/svg.rs` is `["report", "svg"]`, `src/report/mod.rs` is `["report"]`;
    /// the crate roots (`lib.rs`, `main.rs`) are `[]`.
    pub module: Vec<String>,
    /// As written in messages: `src/report/svg.rs`.
    pub name: String,
    pub code: String,
}

/// Every `.rs` file under `src`, in path order.
pub fn source_files(src: &Path) -> Vec<SourceFile> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(src).expect("under src");
            let source = std::fs::read_to_string(&path).expect("readable source");
            SourceFile {
                module: module_path(relative),
                name: format!("src/{}", relative.display()),
                code: code_only(&source),
            }
        })
        .collect()
}

fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.strip_suffix(".rs").unwrap_or(&file);
    let is_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !is_root {
        parts.push(stem.to_owned());
    }
    parts
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

/// Where a path starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    Crate,
    /// `super::` this many times.
    Super(usize),
    SelfModule,
}

/// One path named in the code: `crate::os::disk::Disk` is `(Crate, [os, disk, Disk])`;
/// `use super::{a, b::c}` gives two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRef {
    pub line: usize,
    pub root: Root,
    pub segments: Vec<String>,
}

impl PathRef {
    /// The absolute module path this names, from a file whose module is `module`. A
    /// `super::` that climbs above the crate root names nothing.
    pub fn resolve(&self, module: &[String]) -> Option<Vec<String>> {
        let mut base = match self.root {
            Root::Crate => Vec::new(),
            Root::SelfModule => module.to_vec(),
            Root::Super(n) => module[..module.len().checked_sub(n)?].to_vec(),
        };
        base.extend(self.segments.iter().cloned());
        Some(base)
    }
}

/// Every path in code that `code_only` has blanked. Paths inside an inline
/// `#[cfg(test)] mod … { … }` are left out: their `super` is the file's own module.
pub fn paths(code: &str) -> Vec<PathRef> {
    let code = without_test_modules(code);
    let chars: Vec<char> = code.chars().collect();
    let mut line = 1;
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            line += 1;
        }
        let starts_word = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if starts_word {
            if let Some((root, after)) = root_at(&chars, i) {
                let mut parser = Parser {
                    chars: &chars,
                    at: after,
                };
                for segments in parser.tree() {
                    found.push(PathRef {
                        line,
                        root,
                        segments,
                    });
                }
                line += chars[i..parser.at].iter().filter(|&&c| c == '\n').count();
                i = parser.at.max(i + 1);
                continue;
            }
        }
        i += 1;
    }
    found
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn word_at(chars: &[char], at: usize) -> &[char] {
    let end = (at..chars.len())
        .find(|&j| !is_ident(chars[j]))
        .unwrap_or(chars.len());
    &chars[at..end]
}

fn follows(chars: &[char], at: usize, text: &str) -> bool {
    text.chars()
        .enumerate()
        .all(|(k, c)| chars.get(at + k) == Some(&c))
}

/// `crate::`, `self::` or `super::` (repeated) at `at`: the root and where the rest starts.
fn root_at(chars: &[char], at: usize) -> Option<(Root, usize)> {
    for (word, root) in [("crate", Root::Crate), ("self", Root::SelfModule)] {
        if word_at(chars, at).iter().copied().eq(word.chars())
            && follows(chars, at + word.len(), "::")
        {
            return Some((root, at + word.len() + 2));
        }
    }
    let mut supers = 0;
    let mut j = at;
    while word_at(chars, j).iter().copied().eq("super".chars()) && follows(chars, j + 5, "::") {
        supers += 1;
        j += 7;
    }
    (supers > 0).then_some((Root::Super(supers), j))
}

struct Parser<'a> {
    chars: &'a [char],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    /// `a::b::c`, `a::{…}`, `{…}`, `*`: every path this names, relative to where it starts.
    fn tree(&mut self) -> Vec<Vec<String>> {
        let mut prefix = Vec::new();
        loop {
            self.skip_space();
            match self.chars.get(self.at) {
                Some('{') => {
                    self.at += 1;
                    let mut all = Vec::new();
                    loop {
                        for mut path in self.tree() {
                            let mut full = prefix.clone();
                            full.append(&mut path);
                            all.push(full);
                        }
                        self.skip_space();
                        match self.chars.get(self.at) {
                            Some(',') => self.at += 1,
                            Some('}') => {
                                self.at += 1;
                                return all;
                            }
                            _ => return all,
                        }
                        self.skip_space();
                        if self.chars.get(self.at) == Some(&'}') {
                            self.at += 1;
                            return all;
                        }
                    }
                }
                Some('*') => {
                    self.at += 1;
                    return vec![prefix];
                }
                Some(&c) if is_ident(c) => {
                    let word: String = word_at(self.chars, self.at).iter().collect();
                    self.at += word.chars().count();
                    if word != "self" {
                        prefix.push(word);
                    }
                    if follows(self.chars, self.at, "::") {
                        self.at += 2;
                        continue;
                    }
                    self.skip_alias();
                    return vec![prefix];
                }
                _ => return vec![prefix],
            }
        }
    }

    /// ` as name` after a use item.
    fn skip_alias(&mut self) {
        let save = self.at;
        self.skip_space();
        if word_at(self.chars, self.at)
            .iter()
            .copied()
            .eq("as".chars())
        {
            self.at += 2;
            self.skip_space();
            self.at += word_at(self.chars, self.at).len();
        } else {
            self.at = save;
        }
    }
}

/// The code with every `#[cfg(test)]` module's body blanked, newlines kept.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = &rest[at..];
        let body = after
            .find('{')
            .filter(|&brace| after[..brace].contains("mod "));
        let Some(brace) = body else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
            continue;
        };
        out.push_str(&rest[..at]);
        let mut depth = 0;
        let mut end = after.len();
        for (k, c) in after[brace..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = brace + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.extend(after[..end].chars().filter(|&c| c == '\n'));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The source with comments and the contents of string and char literals blanked out, so
/// that what remains is code. Line structure is kept, so line numbers stay right.
pub fn code_only(source: &str) -> String {
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
