//! The source tree's shape, read at test time (issue 25): front ends are pure lowerings
//! that name neither the compiler nor the matcher, the mask module never names the
//! matcher, no source file but the EBNF parser is over 1,200 lines, the README's layout
//! section names every folder, and the 0.x API keeps compiling (`old_api`).

mod old_api;

use std::path::{Path, PathBuf};

/// The workspace root: the crate's own folder (it holds `Cargo.lock`).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, recursively, sorted (none when `dir` does not exist).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of code (not comments) of `files` that contain one of `names`, as
/// `path:line: text`.
fn naming(files: &[PathBuf], names: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            // Code only: documentation may still point a reader at the compiler.
            let code = !line.trim_start().starts_with("//");
            if code && names.iter().any(|n| line.contains(n)) {
                let rel = f.strip_prefix(root()).unwrap_or(f);
                hits.push(format!("{}:{}: {}", rel.display(), i + 1, line.trim()));
            }
        }
    }
    hits
}

/// Lines a front end may hold that name a compile error type: deprecated re-exports of the
/// crate's error module (`src/error.rs`) kept at their 0.x paths (see docs/migrating.md);
/// they name neither the compiler module nor anything of it.
const COMPAT_REEXPORTS: &[&str] = &["pub use crate::error::RegexCompileError;"];

/// The front ends (`json_schema`, `regex`, `structural_tag`, `grammar::ebnf`) name neither
/// the compiler (no import of it, none of its types, no `impl GrammarCompiler` block) nor
/// the matcher: they lower their input to grammar IR and nothing more.
#[test]
fn front_ends_name_neither_compiler_nor_matcher() {
    let src = root().join("src");
    let mut files = Vec::new();
    for dir in ["json_schema", "regex", "structural_tag"] {
        files.extend(rust_files(&src.join(dir)));
    }
    files.push(src.join("grammar").join("ebnf.rs"));
    assert!(files.len() > 10, "front-end files not found: {files:?}");
    let hits: Vec<String> = naming(
        &files,
        &[
            "crate::compiler",
            "GrammarCompiler",
            "CompiledGrammar",
            "CompileError",
            "crate::matcher",
            "GrammarMatcher",
            "MatcherError",
        ],
    )
    .into_iter()
    .filter(|hit| !COMPAT_REEXPORTS.iter().any(|line| hit.ends_with(line)))
    .collect();
    assert!(
        hits.is_empty(),
        "front ends naming the compiler or the matcher:\n{}",
        hits.join("\n")
    );
}

/// Asserts that no code line of the mask module names any of `names` (`what` says whose
/// names they are, for the message).
fn assert_mask_does_not_name(names: &[&str], what: &str) {
    let files = rust_files(&root().join("src").join("mask"));
    assert!(files.len() > 5, "mask files not found: {files:?}");
    let hits = naming(&files, names);
    assert!(
        hits.is_empty(),
        "mask naming the {what}:\n{}",
        hits.join("\n")
    );
}

/// The mask module (trie, mask cache, mask planning, bitmask helpers) never names the
/// matcher.
#[test]
fn mask_does_not_name_the_matcher() {
    assert_mask_does_not_name(
        &["crate::matcher", "GrammarMatcher", "MatcherError"],
        "matcher",
    );
}

/// No Rust source file of the engine, the tools, the command line or the Python binding
/// is over 1,200 lines, except the EBNF parser.
#[test]
fn no_source_file_is_over_1200_lines() {
    let mut files = Vec::new();
    for dir in ["src", "tools/src", "cli/src", "python/src"] {
        files.extend(rust_files(&root().join(dir)));
    }
    assert!(files.len() > 50, "source files not found");
    let exempt = root().join("src").join("grammar").join("ebnf.rs");
    let long: Vec<String> = files
        .iter()
        .filter(|f| **f != exempt)
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            let rel = f.strip_prefix(root()).unwrap_or(f);
            (lines > 1200).then(|| format!("{}: {lines} lines", rel.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over 1,200 lines:\n{}",
        long.join("\n")
    );
}

/// The README's "Layout" section: the text from its heading to the next `## ` heading.
fn readme_layout() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Layout\n")
        .expect("README.md has a `## Layout` section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// True when `text` holds `name` as a whole path: not preceded by a character of a path
/// (so `src/` is not found inside `tools/src/`) and, for a file, not followed by one.
fn names_path(text: &str, name: &str) -> bool {
    let is_path = |c: char| c.is_alphanumeric() || "/_.-".contains(c);
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(is_path) && (name.ends_with('/') || !after.is_some_and(is_path))
    })
}

/// Every folder of the repository (`git ls-files`) is named in the README's layout
/// section by its full path with a trailing `/` (`tools/src/stream/`), and every
/// top-level file by its name. Skipped (with a message) outside a git checkout, unless
/// `CI=true`.
#[test]
fn readme_layout_names_every_folder_and_top_level_file() {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(root())
        .output();
    let files = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        other => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!ci, "CI=true but `git ls-files` failed: {other:?}");
            eprintln!("skipping: not a git checkout ({other:?})");
            return;
        }
    };
    let mut wanted = std::collections::BTreeSet::new();
    for f in files.lines() {
        match f.rsplit_once('/') {
            // Every folder on the way, so a folder holding only folders is named too.
            Some((dir, _)) => {
                let mut at = String::new();
                for part in dir.split('/') {
                    at.push_str(part);
                    at.push('/');
                    wanted.insert(at.clone());
                }
            }
            None => {
                wanted.insert(f.to_string());
            }
        }
    }
    assert!(
        wanted.len() > 50,
        "git ls-files listed too little: {wanted:?}"
    );
    let layout = readme_layout();
    let missing: Vec<&String> = wanted.iter().filter(|w| !names_path(&layout, w)).collect();
    assert!(
        missing.is_empty(),
        "README.md's layout section does not name:\n{}",
        missing
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
