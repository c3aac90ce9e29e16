//! The layout rules of the workspace, checked on the source files: no file under a crate's
//! `src/` over 800 lines; capstan-core free of I/O crates; no pure module left in the daemon
//! crate (pure code belongs in capstan-core, whose lints keep it pure) but those listed with
//! a reason; the test kit a dev-dependency adding no crate; the test binaries sharing helpers
//! through the kit, never by including each other's files; and every path the README and the
//! book name exists. Import cycles, distribution branches and function lengths are read as
//! Rust in `architecture.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where each crate's sources are.
pub(crate) const SOURCE_ROOTS: &[&str] = &[
    "src",
    "crates/core/src",
    "crates/lab/src",
    "crates/testkit/src",
    "crates/talos-api/src",
];

const MAX_LINES: usize = 800;

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source folder") {
        let path = entry.expect("folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
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
        "src/providers/proxmox/machine_config.rs",
        "the Proxmox client's config parameters for a VM's hardware, computed from the config \
         the client read, beside the client",
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
        "src/providers/kubeadm/patches.rs",
        "the cluster's patches merged into the files kubeadm reads on a node, beside the \
         templates they patch: only the kubeadm provider knows kubeadm's files (STYLE §1)",
    ),
    (
        "src/providers/kubeadm/registries.rs",
        "kubernetes.registries as the files CRI-O reads on a kubeadm node (registries.conf.d, \
         its auth file, certs.d): only the kubeadm provider knows its nodes' files (STYLE §1)",
    ),
    (
        "src/providers/k3s/registries.rs",
        "kubernetes.registries as K3s's registries.yaml: only the K3s provider knows K3s's \
         files (STYLE §1)",
    ),
    (
        "src/providers/kubeadm/authentication.rs",
        "the API server's authentication file, flag and volume in the files kubeadm reads on a \
         control plane, beside the templates: only the kubeadm provider knows kubeadm's files \
         (STYLE §1)",
    ),
    (
        "src/providers/k3s/authentication.rs",
        "the API server's authentication file and argument in K3s's config.yaml on a server, \
         beside the install steps: only the K3s provider knows K3s's files (STYLE §1)",
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
