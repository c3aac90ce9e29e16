//! The architecture, read as Rust (with `syn`, not by scanning text): no import cycle between
//! the files of a crate, no question of which distribution a cluster runs outside the
//! distribution modules, and no function over [`MAX_FUNCTION_LINES`] lines but those listed
//! with a reason. Each rule is proved on planted code before it is trusted on the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use crate::layout::{SOURCE_ROOTS, rust_files};

/// A function longer than this is several steps that want names of their own.
const MAX_FUNCTION_LINES: usize = 100;

/// A module path inside a crate: `["plan", "cluster", "version"]`.
type ModulePath = Vec<String>;

/// The modules a file refers to through `crate::`, `super::` and `self::` paths, in `use`
/// items (groups included: `use super::{a, b}`) and in code; `#[cfg(test)]` modules are left
/// out, since tests may reach anywhere.
#[derive(Default)]
struct References {
    /// The module the visitor is in: the file's, then any inline module's.
    within: ModulePath,
    found: Vec<ModulePath>,
}

impl References {
    fn of(module: &ModulePath, file: &syn::File) -> Vec<ModulePath> {
        let mut references = References {
            within: module.clone(),
            found: Vec::new(),
        };
        references.visit_file(file);
        references.found
    }

    /// Records `segments` (as written) resolved against the module the visitor is in.
    fn record(&mut self, segments: &[String]) {
        let mut base = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super" | "self") => self.within.clone(),
            _ => return,
        };
        let mut rest = &segments[usize::from(segments[0] == "crate")..];
        while let Some(first) = rest.first() {
            match first.as_str() {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        self.found.push(base);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for References {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_cfg_test(&item.attrs) || item.content.is_none() {
            return;
        }
        self.within.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.within.pop();
    }
}

fn is_cfg_test(attributes: &[syn::Attribute]) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident("cfg")
            && attribute
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The module a file defines: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` the root.
fn module_of(root: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(root).expect("file under its root");
    let mut parts: ModulePath = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).expect("read source file");
    syn::parse_file(&text).unwrap_or_else(|err| panic!("{}: {err}", file.display()))
}

/// A crate's files (the binary's `main.rs` left out: it is a crate of its own) by module.
fn crate_files(root: &Path) -> BTreeMap<ModulePath, syn::File> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files
        .into_iter()
        .filter(|file| !(file.parent() == Some(root) && file.ends_with("main.rs")))
        .map(|file| (module_of(root, &file), parse(&file)))
        .collect()
}

/// For every module, the sibling subtrees its files depend on: a reference from `a::b::c` to
/// `a::d::e` is an edge `a::b` → `a::d`. A parent and its descendants may use each other.
fn dependency_edges(
    files: &BTreeMap<ModulePath, syn::File>,
) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let mut edges: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, file) in files {
        for target in References::of(module, file) {
            // The longest prefix that is a file of its own.
            let Some(target) = (1..=target.len())
                .rev()
                .map(|n| target[..n].to_vec())
                .find(|prefix| files.contains_key(prefix))
            else {
                continue;
            };
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == module.len() || common == target.len() {
                continue;
            }
            edges
                .entry(module[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    edges
}

/// Every pair of modules that reach each other, as `a <-> b` (each pair once).
fn cycles(edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<String> {
    let reaches = |from: &ModulePath, to: &ModulePath| {
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
    };
    let mut found = Vec::new();
    for (module, targets) in edges {
        for target in targets {
            if module < target && reaches(target, module) {
                found.push(format!("{} <-> {}", module.join("::"), target.join("::")));
            }
        }
    }
    found
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut found = Vec::new();
    for root in SOURCE_ROOTS {
        for cycle in cycles(&dependency_edges(&crate_files(Path::new(root)))) {
            found.push(format!("{root}: {cycle}"));
        }
    }
    assert!(
        found.is_empty(),
        "import cycles (move what both need into a file of its own): {found:#?}"
    );
}

#[test]
fn a_cycle_through_a_use_group_is_found() {
    let file = |text: &str| syn::parse_file(text).expect("parses");
    let module = |path: &str| path.split("::").map(str::to_owned).collect::<ModulePath>();
    let mut files = BTreeMap::new();
    files.insert(module("proxmox"), file("mod handlers; mod vm;"));
    files.insert(
        module("proxmox::handlers"),
        file("pub struct Reply; fn f() { super::vm::start(); }"),
    );
    files.insert(
        module("proxmox::vm"),
        file("use super::{handlers::Reply, other}; pub fn start() {}"),
    );
    assert_eq!(
        cycles(&dependency_edges(&files)),
        ["proxmox::handlers <-> proxmox::vm"]
    );
    // Tests may reach anywhere; a parent and its children may use each other.
    files.insert(
        module("proxmox::vm"),
        file("#[cfg(test)] mod tests { use super::super::handlers::Reply; } use super::Thing;"),
    );
    assert!(cycles(&dependency_edges(&files)).is_empty());
}

/// The only places that may ask which distribution a cluster runs, each with why; everything
/// else calls the `Distribution` interface or reads core's `Capabilities`.
const DISTRIBUTION_MODULES: &[(&str, &str)] = &[
    (
        "src/execute/distribution/",
        "the Distribution trait, its three implementations, and `of`, which chooses one per cluster",
    ),
    ("src/providers/kubeadm/", "kubeadm's node commands"),
    ("src/providers/k3s/", "K3s's node commands"),
    ("src/providers/talos/", "the Talos API client"),
    (
        "crates/core/src/spec/distribution.rs",
        "each distribution's Capabilities: the one description the planner and the validator read",
    ),
    (
        "crates/core/src/spec/k3s.rs",
        "validation of the fields one distribution has and the others refuse (a K3s build in the version, a datastore, Talos's release)",
    ),
    (
        "crates/core/src/spec/patches/",
        "patches in each distribution's own language: its merge rules, its reference data, what it owns",
    ),
    (
        "crates/core/src/spec/talos.rs",
        "validation of the `talos` section, which only Talos clusters have",
    ),
    (
        "crates/lab/src/",
        "the lab simulates each distribution's software; it is not capstan",
    ),
];

/// Where a file asks which distribution a cluster runs: a `Distribution::<variant>` path, an
/// `is_k3s`/`is_talos`/`is_kubeadm` call, or a `match` on a value named `distribution`; by
/// the function it is in.
#[derive(Default)]
struct Branches {
    function: String,
    found: Vec<String>,
}

const VARIANTS: &[&str] = &["Kubeadm", "K3s", "Talos"];

impl<'ast> Visit<'ast> for Branches {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let outer = std::mem::replace(&mut self.function, item.sig.ident.to_string());
        syn::visit::visit_item_fn(self, item);
        self.function = outer;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        let outer = std::mem::replace(&mut self.function, item.sig.ident.to_string());
        syn::visit::visit_impl_item_fn(self, item);
        self.function = outer;
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let asks = names
            .windows(2)
            .any(|pair| pair[0] == "Distribution" && VARIANTS.contains(&pair[1].as_str()))
            || names
                .last()
                .is_some_and(|last| matches!(last.as_str(), "is_k3s" | "is_talos" | "is_kubeadm"));
        if asks {
            self.found
                .push(format!("fn {}: {}", self.function, names.join("::")));
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = call.method.to_string();
        if matches!(method.as_str(), "is_k3s" | "is_talos" | "is_kubeadm") {
            self.found
                .push(format!("fn {}: .{method}()", self.function));
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_expr_match(&mut self, matched: &'ast syn::ExprMatch) {
        let named_distribution = match &*matched.expr {
            syn::Expr::Field(field) => {
                matches!(&field.member, syn::Member::Named(name) if name == "distribution")
            }
            syn::Expr::Path(path) => path.path.is_ident("distribution"),
            _ => false,
        };
        if named_distribution {
            self.found
                .push(format!("fn {}: match on a distribution", self.function));
        }
        syn::visit::visit_expr_match(self, matched);
    }
}

fn branches_in(file: &syn::File) -> Vec<String> {
    let mut branches = Branches::default();
    branches.visit_file(file);
    branches.found
}

/// Whether `file` holds tests only (test files, fixtures, property tests).
fn is_test_file(file: &Path) -> bool {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name.ends_with("tests.rs")
        || matches!(name, "fixtures.rs" | "proptests.rs")
        || file.components().any(|c| c.as_os_str() == "tests")
}

/// Whether `file` imports everything of its parent at its top level (`use super::*;`): what
/// it takes from there can then be found only by searching.
fn imports_its_parent_whole(file: &syn::File) -> bool {
    fn glob_of_super(tree: &syn::UseTree) -> bool {
        match tree {
            syn::UseTree::Path(path) if path.ident == "super" => {
                matches!(&*path.tree, syn::UseTree::Glob(_))
            }
            _ => false,
        }
    }
    file.items.iter().any(|item| match item {
        syn::Item::Use(used) => !is_cfg_test(&used.attrs) && glob_of_super(&used.tree),
        _ => false,
    })
}

#[test]
fn no_file_but_a_test_imports_its_parent_whole() {
    let mut found = Vec::new();
    for root in SOURCE_ROOTS {
        let mut files = Vec::new();
        rust_files(Path::new(root), &mut files);
        for file in files.iter().filter(|file| !is_test_file(file)) {
            if imports_its_parent_whole(&parse(file)) {
                found.push(file.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "name what these files take from their parent (`use super::{{A, b}};`), not `use super::*;`: {found:#?}"
    );
    let planted: syn::File = syn::parse_str("use super::*;\nfn f() {}").expect("parses");
    assert!(
        imports_its_parent_whole(&planted),
        "the check sees a planted glob"
    );
    let named: syn::File = syn::parse_str("use super::{a, B};").expect("parses");
    assert!(!imports_its_parent_whole(&named));
}

#[test]
fn no_code_outside_the_distribution_modules_asks_which_distribution_a_cluster_runs() {
    for (module, why) in DISTRIBUTION_MODULES {
        assert!(Path::new(module).exists(), "{module} ({why}) is gone");
    }
    let mut found = Vec::new();
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
            for branch in branches_in(&parse(&file)) {
                found.push(format!("{path}: {branch}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "ask the Distribution interface (src/execute/distribution/) or Capabilities instead: {found:#?}"
    );
}

#[test]
fn a_distribution_branch_is_recognised_for_each_distribution() {
    let found = |code: &str| branches_in(&syn::parse_file(code).expect("parses"));
    for branch in [
        "fn a(d: Distribution) -> bool { d == Distribution::Talos }",
        "fn a(spec: &Spec) -> u8 { match spec.kubernetes.distribution { _ => 1 } }",
        "fn a(ctx: &Ctx) -> bool { k3s::is_k3s(ctx) }",
        "fn a() { if let Distribution::Kubeadm = d() {} }",
        "fn a(s: &Spec) -> bool { s.is_talos() }",
    ] {
        assert_eq!(found(branch).len(), 1, "{branch}");
    }
    for other in [
        "fn a(s: &Spec) -> Distribution { s.kubernetes.distribution }",
        "// Distribution::K3s in a comment\nfn a() {}",
        "fn a(c: &Capabilities) -> bool { c.upgrades_in_place }",
        "#[cfg(test)] mod tests { fn t() { let _ = Distribution::Talos; } }",
    ] {
        assert!(found(other).is_empty(), "{other}");
    }
}

/// Functions over [`MAX_FUNCTION_LINES`] lines that stay whole, each with why.
const LONG_FUNCTIONS: &[(&str, &str)] = &[
    (
        "crates/lab/src/kube/table.rs::cells",
        "kubectl's table columns per resource, one arm each",
    ),
    (
        "crates/lab/src/proxmox/endpoints.rs::config_params",
        "the table of `qm config` parameters the lab accepts, one line each",
    ),
    (
        "crates/lab/src/proxmox/endpoints.rs::endpoints",
        "the simulated API's route table, one entry per endpoint: a list to read down, not steps",
    ),
];

/// Functions that were over [`MAX_FUNCTION_LINES`] lines when this rule came, with their
/// length then: each is to be split into named steps, and none may grow meanwhile (the
/// test fails when one does, and when one is split so that it can leave this list).
const TO_SPLIT: &[(&str, usize)] = &[
    ("src/source/tracker.rs::refresh", 112),
    ("src/source/tree.rs::read_commit", 108),
    ("src/daemon/mod.rs::pass", 119),
    ("src/observe/mod.rs::observe", 129),
    ("src/observe/mod.rs::observe_api", 125),
    ("src/commands/demo.rs::demo", 104),
    ("src/commands/run/mod.rs::run", 126),
    ("src/commands/status.rs::render_cluster", 101),
    ("crates/core/src/spec/notifications.rs::validate", 120),
    ("crates/core/src/spec/validate.rs::fleet", 134),
    ("crates/core/src/spec/mod.rs::load", 106),
    ("crates/core/src/notify/mod.rs::cluster_events", 124),
    ("crates/core/src/talos/iso9660.rs::write_image", 108),
    ("crates/core/src/plan/simulate.rs::apply", 197),
    ("crates/core/src/status/mod.rs::cluster_status", 175),
    ("crates/core/src/dashboard/cluster.rs::cluster_page", 130),
    ("crates/core/src/preview/mod.rs::build_within", 170),
    ("crates/lab/src/nodes/systems/kubeadm.rs::init", 174),
    ("crates/lab/src/kube/cluster.rs::register_node", 113),
    ("crates/lab/src/proxmox/state.rs::from_world", 123),
    ("crates/lab/src/proxmox/upload.rs::upload", 110),
    ("crates/lab/src/proxmox/agent_handlers.rs::agent", 183),
    ("crates/lab/src/proxmox/vm_handlers.rs::clone_vm", 177),
    ("crates/testkit/src/world.rs::start_daemon_as", 116),
];

/// Every function (free or in an `impl`) of a file outside `#[cfg(test)]` modules, with its
/// length in lines from `fn` to its closing brace.
#[derive(Default)]
struct Lengths {
    found: Vec<(String, usize)>,
}

impl Lengths {
    fn note(&mut self, name: &syn::Ident, signature: &syn::Signature, body: &syn::Block) {
        let first = signature.fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        self.found.push((name.to_string(), last + 1 - first));
    }
}

impl<'ast> Visit<'ast> for Lengths {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.note(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.note(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }
}

fn function_lengths(file: &syn::File) -> Vec<(String, usize)> {
    let mut lengths = Lengths::default();
    lengths.visit_file(file);
    lengths.found
}

#[test]
fn no_function_is_over_100_lines_but_those_listed_with_a_reason() {
    let mut long = Vec::new();
    let mut seen = BTreeSet::new();
    for root in SOURCE_ROOTS {
        let mut files = Vec::new();
        rust_files(Path::new(root), &mut files);
        for file in files.iter().filter(|f| !is_test_file(f)) {
            let path = file.to_string_lossy().replace('\\', "/");
            for (name, lines) in function_lengths(&parse(file)) {
                let place = format!("{path}::{name}");
                seen.insert(place.clone());
                let ceiling = TO_SPLIT
                    .iter()
                    .find(|(listed, _)| *listed == place)
                    .map(|(_, ceiling)| *ceiling);
                if LONG_FUNCTIONS.iter().any(|(listed, _)| *listed == place) {
                    continue;
                }
                match ceiling {
                    Some(ceiling) if lines > ceiling => {
                        long.push(format!("{place} grew to {lines} lines (it was {ceiling})"));
                    }
                    Some(_) if lines <= MAX_FUNCTION_LINES => {
                        long.push(format!(
                            "{place} is {lines} lines now: take it off TO_SPLIT"
                        ));
                    }
                    Some(_) => {}
                    None if lines > MAX_FUNCTION_LINES => {
                        long.push(format!("{place} ({lines} lines)"));
                    }
                    None => {}
                }
            }
        }
    }
    let listed = LONG_FUNCTIONS
        .iter()
        .map(|(place, _)| *place)
        .chain(TO_SPLIT.iter().map(|(place, _)| *place));
    long.extend(
        listed
            .filter(|place| !seen.contains(*place))
            .map(|place| format!("{place} is gone: take it off the list")),
    );
    assert!(
        long.is_empty(),
        "name the steps of these functions (or list one in LONG_FUNCTIONS with why): {long:#?}"
    );
}

#[test]
fn a_function_is_measured_from_fn_to_its_closing_brace() {
    let file = syn::parse_file("fn short() {}\n\nfn three() {\n    let x = 1;\n}\n#[cfg(test)]\nmod tests {\n    fn hidden() {}\n}\n")
        .expect("parses");
    assert_eq!(
        function_lengths(&file),
        [("short".to_owned(), 1), ("three".to_owned(), 3)]
    );
}
