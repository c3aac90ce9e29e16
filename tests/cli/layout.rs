//! The layout rules of the workspace, checked on the source files: no file under a crate's
//! `src/` over 800 lines, and no import cycle between the files of one module (a file that
//! needs a sibling which needs it back is one concern split in two, or two concerns tangled);
//! the crates depend on each other as the README's layout says; the test binaries share
//! helpers through the test kit, never by including each other's files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where each crate's sources are.
const SOURCE_ROOTS: &[&str] = &[
    "src",
    "crates/core/src",
    "crates/lab/src",
    "crates/testkit/src",
];

const MAX_LINES: usize = 800;

/// A module path inside a crate: `["plan", "cluster", "version"]`.
type ModulePath = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source folder") {
        let path = entry.expect("folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file defines: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`/`main.rs` the root.
fn module_of(root: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(root).expect("file under its root");
    let mut parts: ModulePath = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The modules `file` refers to through `crate::…`, `super::…` and `self::…` paths (inline
/// `mod tests` blocks left out: tests may reach anywhere).
fn references(file: &Path, module: &ModulePath) -> Vec<ModulePath> {
    let text = std::fs::read_to_string(file).expect("read source file");
    let code = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    let mut found = Vec::new();
    for (index, _) in code.match_indices("::") {
        let start = code[..index]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let end = code[index..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(code.len(), |i| index + i);
        let path: Vec<&str> = code[start..end].split("::").collect();
        let (mut base, rest): (ModulePath, &[&str]) = match path.first() {
            Some(&"crate") => (Vec::new(), &path[1..]),
            Some(&"super" | &"self") => (module.clone(), &path[..]),
            _ => continue,
        };
        let mut rest = rest;
        while let Some(first) = rest.first() {
            match *first {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        base.extend(rest.iter().map(|s| (*s).to_owned()));
        found.push(base);
    }
    found
}

/// For every module, which siblings its files (and their children) depend on.
fn sibling_edges(root: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeMap<ModulePath, PathBuf> = files
        .iter()
        .map(|file| (module_of(root, file), file.clone()))
        .collect();
    let mut edges: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, file) in &modules {
        for target in references(file, module) {
            // The longest prefix that is a module of its own file.
            let Some(target) = (1..=target.len())
                .rev()
                .map(|n| target[..n].to_vec())
                .find(|prefix| modules.contains_key(prefix))
            else {
                continue;
            };
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == module.len() || common == target.len() {
                continue; // a parent and its descendants may use each other
            }
            edges
                .entry(module[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    edges
}

fn reaches(
    edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
    from: &ModulePath,
    to: &ModulePath,
) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.clone()];
    while let Some(module) = stack.pop() {
        if &module == to {
            return true;
        }
        if seen.insert(module.clone()) {
            stack.extend(edges.get(&module).into_iter().flatten().cloned());
        }
    }
    false
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut long = Vec::new();
    for root in SOURCE_ROOTS {
        let mut files = Vec::new();
        rust_files(Path::new(root), &mut files);
        for file in files {
            let lines = std::fs::read_to_string(&file)
                .expect("read")
                .lines()
                .count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "split these files: {long:?}");
}

#[test]
fn no_two_files_of_a_module_import_each_other() {
    let mut cycles = Vec::new();
    for root in SOURCE_ROOTS {
        let edges = sibling_edges(Path::new(root));
        for (module, targets) in &edges {
            for target in targets {
                if module < target && reaches(&edges, target, module) {
                    cycles.push(format!(
                        "{root}: {} <-> {}",
                        module.join("::"),
                        target.join("::")
                    ));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
}

/// The `[dependencies]` names of a crate's manifest.
fn dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("read manifest");
    let Some((_, section)) = text.split_once("\n[dependencies]\n") else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split(['.', ' ', '=']).next())
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_core_has_no_io_dependency_and_the_lab_does_not_depend_on_the_daemon() {
    let core = dependencies("crates/core/Cargo.toml");
    assert!(
        core.contains(&"serde".to_owned()),
        "read the core's manifest: {core:?}"
    );
    for forbidden in [
        "tokio", "reqwest", "hyper", "kube", "notify", "git2", "axum", "capstan",
    ] {
        assert!(
            !core.iter().any(|name| name == forbidden),
            "capstan-core must stay pure, but depends on {forbidden}"
        );
    }
    let lab = dependencies("crates/lab/Cargo.toml");
    assert!(lab.contains(&"capstan-core".to_owned()), "{lab:?}");
    assert!(
        !lab.iter().any(|name| name == "capstan"),
        "the lab judges the daemon, so it must not depend on it"
    );
}

#[test]
fn the_test_kit_is_a_dev_dependency_that_adds_no_crate_to_the_build() {
    let daemon = dependencies("Cargo.toml");
    assert!(daemon.contains(&"tokio".to_owned()), "{daemon:?}");
    assert!(
        !daemon.iter().any(|name| name == "capstan-testkit"),
        "the test kit is for tests only: a dev-dependency"
    );
    let manifest = std::fs::read_to_string("Cargo.toml").expect("read manifest");
    let dev = manifest
        .split_once("\n[dev-dependencies]\n")
        .map(|(_, section)| section)
        .unwrap_or_default();
    assert!(
        dev.lines().any(|line| line.starts_with("capstan-testkit")),
        "tests/ reach the kit as a dev-dependency"
    );
    let kit = dependencies("crates/testkit/Cargo.toml");
    assert!(kit.contains(&"capstan".to_owned()), "{kit:?}");
    for name in &kit {
        assert!(
            daemon.contains(name) || ["capstan", "tempfile"].contains(&name.as_str()),
            "the test kit depends on {name}, which the daemon does not build"
        );
    }
}

#[test]
fn test_binaries_share_helpers_through_the_kit_and_say_what_belongs_in_them() {
    let mut files = Vec::new();
    rust_files(Path::new("tests"), &mut files);
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read test file");
        assert!(
            !text.contains(concat!("#[path", " =")),
            "{} includes another file by path: share it through crates/testkit",
            file.display()
        );
        assert!(
            !text.contains(concat!("allow(dead", "_code)")),
            "{} silences dead code: a helper no test uses goes",
            file.display()
        );
        if file.file_name().is_some_and(|name| name == "main.rs") {
            assert!(
                text.contains("//! Belongs here:"),
                "{} says in a line what belongs in its binary",
                file.display()
            );
        }
    }
}
