//! The layout rules of the workspace, checked on the source files: no file under a crate's
//! `src/` over 800 lines; no import cycle between the files of one module (a file that
//! needs a sibling which needs it back is one concern split in two, or two concerns tangled);
//! capstan-core free of I/O crates; no pure module left in the daemon crate (pure code
//! belongs in capstan-core, whose lints keep it pure) but those listed with a reason; no
//! question of which distribution a cluster runs outside the distribution modules; the test kit
//! a dev-dependency adding no crate; and the test binaries sharing helpers through the kit,
//! never by including each other's files.

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

/// The only places that may ask which distribution a cluster runs, each with why; everything
/// else calls the `Distribution` interface or reads core's `Capabilities`.
const DISTRIBUTION_MODULES: &[(&str, &str)] = &[
    (
        "src/execute/distribution/",
        "the Distribution trait, its kubeadm and K3s implementations, and `of`, which chooses one per cluster",
    ),
    ("src/providers/kubeadm/", "kubeadm's node commands"),
    ("src/providers/k3s/", "K3s's node commands"),
    (
        "crates/core/src/spec/distribution.rs",
        "each distribution's Capabilities: the one description the planner and the validator read",
    ),
    (
        "crates/core/src/spec/k3s.rs",
        "validation of the fields one distribution has and the other refuses (a K3s build in the version, a datastore)",
    ),
];

/// Whether `line` asks which distribution a cluster runs: names a variant, tests for K3s, or
/// matches on a distribution.
fn asks_the_distribution(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    code.contains("is_k3s")
        || code.contains("Distribution::K3s")
        || code.contains("Distribution::Kubeadm")
        || (code.contains("match ") && code.trim_end().ends_with("distribution {"))
}

/// Whether `file` holds tests only (test files, fixtures, property tests).
fn is_test_file(file: &Path) -> bool {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    matches!(name, "tests.rs" | "fixtures.rs" | "proptests.rs")
        || file.components().any(|c| c.as_os_str() == "tests")
}

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

#[test]
fn no_code_outside_the_distribution_modules_asks_which_distribution_a_cluster_runs() {
    for (module, why) in DISTRIBUTION_MODULES {
        assert!(Path::new(module).exists(), "{module} ({why}) is gone");
    }
    let mut branches = Vec::new();
    for root in SOURCE_ROOTS {
        let mut files = Vec::new();
        rust_files(Path::new(root), &mut files);
        for file in files {
            let path = file.to_string_lossy().replace('\\', "/");
            if is_test_file(&file)
                || DISTRIBUTION_MODULES
                    .iter()
                    .any(|(module, _)| path.starts_with(module))
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("read source file");
            let code = text
                .split("#[cfg(test)]\nmod tests {")
                .next()
                .unwrap_or_default();
            for (index, line) in code.lines().enumerate() {
                if asks_the_distribution(line) {
                    branches.push(format!("{path}:{}: {}", index + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        branches.is_empty(),
        "ask the Distribution interface (src/execute/distribution/) or Capabilities instead: {branches:#?}"
    );
}

#[test]
fn a_distribution_branch_is_recognised() {
    for branch in [
        "if k3s::is_k3s(ctx) {",
        "        if spec.kubernetes.distribution == Distribution::K3s {",
        "    Distribution::Kubeadm => \"kubeadm\",",
        "    match spec.kubernetes.distribution {",
    ] {
        assert!(asks_the_distribution(branch), "{branch}");
    }
    for other in [
        "let distribution = spec.kubernetes.distribution;",
        "\"distribution {} → {}\",",
        "// Distribution::K3s in a comment",
        "if !self.capabilities().upgrades_in_place {",
    ] {
        assert!(!asks_the_distribution(other), "{other}");
    }
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

/// The folders of the workspace a README path starts with.
const README_ROOTS: &[&str] = &[
    "src/",
    "crates/",
    "tests/",
    "benches/",
    "deploy/",
    "schemas/",
    "examples-repo/",
];

/// Every path the README names under a folder of the workspace (`src/observe/`,
/// `tests/support/mariadb.rs`), as written: a word starting with one of [`README_ROOTS`],
/// up to the first character no path here has, without a sentence's closing punctuation.
fn readme_paths(readme: &str) -> BTreeSet<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    let mut paths = BTreeSet::new();
    for root in README_ROOTS {
        for (index, _) in readme.match_indices(root) {
            let preceded = readme[..index].chars().next_back();
            if preceded.is_some_and(is_path_char) {
                continue;
            }
            let end = readme[index..]
                .find(|c: char| !is_path_char(c))
                .map_or(readme.len(), |i| index + i);
            let path = readme[index..end].trim_end_matches(['.', ',', ':']);
            paths.insert(path.to_owned());
        }
    }
    paths
}

#[test]
fn every_path_the_readme_and_the_book_name_exists() {
    let mut texts = vec![(
        "README.md".to_owned(),
        std::fs::read_to_string("README.md").expect("read README.md"),
    )];
    let mut folders = vec![std::path::PathBuf::from("docs/src")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read the book") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path).expect("read a page");
                texts.push((path.display().to_string(), text));
            }
        }
    }
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for (page, text) in &texts {
        for path in readme_paths(text) {
            if !Path::new(path.as_str()).exists() {
                missing.push(format!("{page}: {path}"));
            }
            seen.insert(path);
        }
    }
    assert!(
        seen.contains("src/observe/") && seen.contains("crates/core/src/plan/"),
        "read the pages' paths: {seen:?}"
    );
    assert!(
        missing.is_empty(),
        "pages name paths that do not exist: {missing:#?}"
    );
}

/// What shows that a daemon file does I/O (or is the binary's own business): a runtime,
/// network, Kubernetes, Git, database, file-watching, TLS, command-line or metrics crate;
/// the standard library's files, network, processes, environment, streams or threads;
/// async code; randomness; a clock read.
const IO_MARKERS: &[&str] = &[
    "tokio",
    "reqwest",
    "kube::",
    "k8s_openapi",
    "git2",
    "hyper",
    "axum",
    "mysql_async",
    "notify::",
    "rustls",
    "libc::",
    "getrandom",
    "clap::",
    "prometheus_client",
    "tracing_subscriber",
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io",
    "std::thread",
    "async fn",
    ".await",
    "impl Future",
    "Timestamp::now",
    "SystemTime",
    "Instant::now",
];

/// The daemon's files that do no I/O, and why each stays in the daemon rather than in
/// capstan-core (where pure code belongs: its lints keep it pure).
const PURE_IN_THE_DAEMON: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "the daemon crate's root: its modules and core's re-exports",
    ),
    ("src/commands/mod.rs", "names the subcommands' modules"),
    ("src/providers/mod.rs", "names the providers' modules"),
    (
        "src/providers/proxmox/vmids.rs",
        "the VMIDs the Proxmox client's clones in flight hold, shared by its copies",
    ),
    (
        "src/providers/proxmox/hardware.rs",
        "reads the answer of the Proxmox client's VM config call, beside the client",
    ),
    (
        "src/execute/distribution/talos/error.rs",
        "the Talos steps' errors, beside the steps that raise them",
    ),
    (
        "src/providers/proxmox/options.rs",
        "the Proxmox client's timeouts and retries, split from client.rs for its length",
    ),
    (
        "src/secrets/mod.rs",
        "the operator's limits as the daemon's flags give them; the reader beside them reads files",
    ),
    (
        "src/secrets/admission.rs",
        "the operator's limits on a revision, beside the reader that checks them again as it \
         reads; core's preview takes them through preview::Admit",
    ),
    (
        "src/secrets/pins.rs",
        "the connections the operator pinned (flags), for admission.rs",
    ),
    (
        "src/cli/listeners.rs",
        "the command line's HTTP flags made into the listeners' options, split from cli.rs for \
         its length (STYLE §7: flags beside their command)",
    ),
    (
        "src/env_vars.rs",
        "the names of the variables main and cli read, beside the command line (STYLE §7)",
    ),
    (
        "src/daemon/timings.rs",
        "the daemon's memory of measured steps, kept between passes; previews and windows read \
         its medians and 90th percentiles as core's observed::StepDuration",
    ),
    (
        "src/providers/proxmox/ownership.rs",
        "Proxmox's tags: only the Proxmox client knows Proxmox's formats (STYLE §1)",
    ),
    (
        "src/providers/proxmox/upid.rs",
        "Proxmox's task ids: only the Proxmox client knows Proxmox's formats (STYLE §1)",
    ),
    (
        "src/providers/proxmox/wire.rs",
        "Proxmox's JSON shapes: only the Proxmox client knows Proxmox's formats (STYLE §1)",
    ),
];

/// Whether `text` (a file's code, its `mod tests` left out) shows I/O.
fn does_io(text: &str) -> bool {
    let code = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    IO_MARKERS.iter().any(|marker| code.contains(marker))
}

#[test]
fn no_pure_module_is_left_in_the_daemon_but_those_listed_with_a_reason() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    let pure: BTreeSet<String> = files
        .iter()
        // A module's tests (`tests.rs`, `tests/`) go with the module.
        .filter(|file| {
            !file
                .components()
                .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "tests.rs")
        })
        .filter(|file| !does_io(&std::fs::read_to_string(file).expect("read source file")))
        .map(|file| file.to_string_lossy().replace('\\', "/"))
        .collect();
    let listed: BTreeSet<String> = PURE_IN_THE_DAEMON
        .iter()
        .map(|(path, _)| (*path).to_owned())
        .collect();
    let unlisted: Vec<&String> = pure.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "pure modules belong in crates/core (or in PURE_IN_THE_DAEMON, with the reason they \
         stay): {unlisted:?}"
    );
    let stale: Vec<&String> = listed.difference(&pure).collect();
    assert!(
        stale.is_empty(),
        "listed as pure but gone or doing I/O now, take them off PURE_IN_THE_DAEMON: {stale:?}"
    );
}

#[test]
fn the_io_markers_tell_a_pure_file_from_one_doing_io() {
    assert!(does_io("use tokio::sync::watch;\n"));
    assert!(does_io("fn f() { std::fs::read(\"x\"); }\n"));
    assert!(does_io("async fn poll() {}\n"));
    assert!(!does_io(
        "use crate::plan::Plan;\npub fn f(plan: &Plan) {}\n"
    ));
    assert!(!does_io(
        "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use tokio::time;\n}\n"
    ));
}
