//! Whether a revision may be applied as the operator configured the daemon: its secret
//! sources allowed by the [`SecretPolicy`], its connections where [`Pins`] say. Findings are
//! validation errors, with the file, line and field, and the flag that would allow them.
//!
//! Pure: the rules are checked on the parsed files alone (the reader checks the file system
//! when it reads), so a pull request's head is judged without touching anything it names.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::spec::{self, Cluster, Diagnostic, Fleet, Loaded, RepoFiles, SourceFile};

use super::pins::{PinKind, PinOrigin, Pins};
use super::policy::{SecretPolicy, SecretUse};

/// How a revision's connection fields are held.
#[derive(Debug, Clone)]
pub enum PinCheck {
    /// Not checked: a lab, whose connections capstan.yaml does not choose.
    Off,
    /// Every Proxmox `url` and `tlsFingerprint` and every datastore `url` must be pinned.
    Required(Pins),
    /// A preview's head is held to its base revision (the daemon's pins are unknown there).
    AgainstBase,
}

/// The operator's limits a revision must keep before anything of it is applied or previewed.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Secret sources are checked against it (`None`: not known, e.g. a preview in CI).
    policy: Option<Arc<SecretPolicy>>,
    pins: PinCheck,
    /// Whether `tokenFrom`, `caFile` and `kubeconfigFrom` are read (a real fleet), or the
    /// lab's connections stand in for them.
    reads_connections: bool,
    /// The namespaces a cluster may deliver its kubeconfig to (`--delivery-namespaces`);
    /// `None`: any (but `capstan-system`, which validation always refuses).
    delivery_namespaces: Option<Arc<BTreeSet<String>>>,
}

impl Default for Admission {
    /// [`Admission::lab`] with the default policy.
    fn default() -> Self {
        Admission::lab(Arc::new(SecretPolicy::default()))
    }
}

impl Admission {
    /// A real fleet: every secret source is checked against `policy`, every connection
    /// must be pinned by `pins`.
    pub fn fleet(policy: Arc<SecretPolicy>, pins: Pins) -> Self {
        Admission {
            policy: Some(policy),
            pins: PinCheck::Required(pins),
            reads_connections: true,
            delivery_namespaces: None,
        }
    }

    /// A lab: Proxmox and the management clusters are the lab's (what capstan.yaml says of
    /// them is never read), datastores are real servers: their passwords and the clusters'
    /// `endpointFrom` are checked against `policy`; nothing is pinned.
    pub fn lab(policy: Arc<SecretPolicy>) -> Self {
        Admission {
            policy: Some(policy),
            pins: PinCheck::Off,
            reads_connections: false,
            delivery_namespaces: None,
        }
    }

    /// `capstan preview` without a daemon: the head may not change or add a connection its
    /// base does not have; secret sources are the daemon's to judge.
    pub fn against_base() -> Self {
        Admission {
            policy: None,
            pins: PinCheck::AgainstBase,
            reads_connections: true,
            delivery_namespaces: None,
        }
    }

    /// This admission, refusing a cluster file whose `delivery.flux.namespace` is not one of
    /// `namespaces` (none given: no limit).
    #[must_use]
    pub fn with_delivery_namespaces(mut self, namespaces: &[String]) -> Self {
        self.delivery_namespaces = (!namespaces.is_empty())
            .then(|| Arc::new(namespaces.iter().map(|n| n.trim().to_owned()).collect()));
        self
    }

    /// The admission of a preview's head whose base loaded as `base`.
    #[must_use]
    pub fn for_head(&self, base: &Loaded) -> Admission {
        match self.pins {
            PinCheck::AgainstBase => Admission {
                pins: PinCheck::Required(Pins::of_base(
                    base.desired.as_ref().map(|desired| &desired.fleet),
                )),
                ..self.clone()
            },
            _ => self.clone(),
        }
    }

    /// Parses, validates and admits `files`: [`spec::load`], then a refused `capstan.yaml`
    /// leaves no desired state (nothing is applied), and a refused cluster file is invalid
    /// (its cluster is left as it is, Blocked on its file).
    pub fn load(&self, files: &RepoFiles) -> Loaded {
        let mut loaded = spec::load(files);
        let Some(desired) = loaded.desired.as_mut() else {
            return loaded;
        };
        let fleet_file = SourceFile::new(&files.fleet.path, &files.fleet.text);
        let mut fleet_findings = self.fleet_sources(&desired.fleet, &fleet_file);
        fleet_findings.extend(self.fleet_pins(&desired.fleet, &fleet_file));
        let fleet_refused = fleet_findings.iter().any(Diagnostic::is_error);
        loaded.diagnostics.0.extend(fleet_findings);
        let refused: Vec<(String, Diagnostic)> = desired
            .clusters
            .iter()
            .filter_map(|(name, cluster)| {
                let (field, message, hint) = self.cluster_refusal(name, cluster)?;
                let diagnostic = match files
                    .clusters
                    .iter()
                    .find(|file| crate::spec::declared_name(&file.text).as_deref() == Some(name))
                {
                    Some(text) => SourceFile::new(&text.path, &text.text).error(&field, message),
                    // Loaded from these files, so never: refused all the same.
                    None => Diagnostic::file_error(
                        &format!("cluster {name}"),
                        format!("{field}: {message}"),
                    ),
                };
                Some((name.clone(), diagnostic.with_hint(hint)))
            })
            .collect();
        for (name, diagnostic) in refused {
            desired.clusters.remove(&name);
            desired.invalid.insert(diagnostic.file.clone(), Some(name));
            desired.incomplete = true;
            loaded.diagnostics.push(diagnostic);
        }
        if fleet_refused {
            loaded.desired = None;
        }
        loaded.diagnostics.sort();
        loaded
    }

    /// Why cluster `name` is refused under the operator's limits, if it is: the field, the
    /// message and the hint. Its `endpointFrom` and registry `passwordFrom`s must be sources
    /// the policy allows, its Flux delivery a namespace `--delivery-namespaces` allows.
    fn cluster_refusal(&self, name: &str, cluster: &Cluster) -> Option<(String, String, String)> {
        if let Some(policy) = &self.policy
            && let Some(source) = cluster
                .spec
                .kubernetes
                .datastore
                .as_ref()
                .and_then(|d| d.endpoint_from.as_ref())
            && let Err(refusal) = policy.check(SecretUse::KineDsn(name), source)
        {
            let field = SecretUse::KineDsn(name).field();
            return Some((field, refusal.message, refusal.hint));
        }
        if let Some(policy) = &self.policy {
            for (registry, credentials) in &cluster.spec.kubernetes.registries.credentials {
                let use_ = SecretUse::RegistryPassword {
                    cluster: name,
                    registry,
                };
                if let Err(refusal) = policy.check(use_, &credentials.password_from) {
                    return Some((use_.field(), refusal.message, refusal.hint));
                }
            }
        }
        let allowed = self.delivery_namespaces.as_ref()?;
        let flux = cluster.spec.delivery.flux.as_ref()?;
        if allowed.contains(&flux.namespace) {
            return None;
        }
        let list: Vec<&str> = allowed.iter().map(String::as_str).collect();
        Some((
            "spec.delivery.flux.namespace".to_owned(),
            format!(
                "`{}` is not a namespace the daemon delivers kubeconfigs to ({})",
                flux.namespace,
                list.join(", ")
            ),
            format!(
                "deliver to one of them; if this namespace is right, the operator adds it to --delivery-namespaces ({})",
                crate::env_vars::CAPSTAN_DELIVERY_NAMESPACES
            ),
        ))
    }

    /// The refusals of `capstan.yaml`'s secret sources.
    fn fleet_sources(&self, fleet: &Fleet, file: &SourceFile) -> Vec<Diagnostic> {
        let Some(policy) = &self.policy else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut check = |use_: SecretUse<'_>, refusal: Result<(), super::Refusal>| {
            if let Err(refusal) = refusal {
                out.push(
                    file.error(&use_.field(), refusal.message)
                        .with_hint(refusal.hint),
                );
            }
        };
        if self.reads_connections {
            for (name, connection) in &fleet.proxmox {
                let token = SecretUse::ProxmoxToken(name);
                check(token, policy.check(token, &connection.token_from));
                if let Some(ca_file) = &connection.ca_file {
                    let ca = SecretUse::ProxmoxCa(name);
                    check(ca, policy.check_file(ca, ca_file).map(drop));
                }
            }
            for (name, management) in &fleet.management_clusters {
                let kubeconfig = SecretUse::ManagementKubeconfig(name);
                check(
                    kubeconfig,
                    policy.check(kubeconfig, &management.kubeconfig_from),
                );
            }
        }
        for (name, server) in &fleet.datastores {
            let password = SecretUse::DatastorePassword(name);
            check(
                password,
                policy.check(password, &server.admin_password_from),
            );
        }
        // Receivers are real servers, with a lab as without one.
        for (name, provider) in &fleet.notifications.providers {
            let address = SecretUse::NotificationAddress(name);
            check(address, policy.check(address, &provider.address_from));
            if let Some(key) = &provider.signing_key_from {
                let signing = SecretUse::NotificationSigningKey(name);
                check(signing, policy.check(signing, key));
            }
        }
        out
    }

    /// The refusals of `capstan.yaml`'s connection fields under the pins.
    fn fleet_pins(&self, fleet: &Fleet, file: &SourceFile) -> Vec<Diagnostic> {
        let PinCheck::Required(pins) = &self.pins else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, connection) in &fleet.proxmox {
            let url = format!("proxmox.{name}.url");
            out.extend(held(
                pins,
                file,
                &url,
                Some(&connection.url),
                PinKind::ProxmoxUrl,
            ));
            let fingerprint = format!("proxmox.{name}.tlsFingerprint");
            out.extend(held(
                pins,
                file,
                &fingerprint,
                connection.tls_fingerprint.as_deref(),
                PinKind::Fingerprint,
            ));
        }
        for (name, server) in &fleet.datastores {
            let url = format!("datastores.{name}.url");
            out.extend(held(pins, file, &url, Some(&server.url), PinKind::MysqlUrl));
        }
        out
    }
}

/// The refusal of `field` holding `value` under `pins`, if it is refused.
fn held(
    pins: &Pins,
    file: &SourceFile,
    field: &str,
    value: Option<&str>,
    kind: PinKind,
) -> Option<Diagnostic> {
    let pinned = pins.get(field);
    let (message, hint) = match (value, pinned, pins.origin()) {
        (None, None, _) => return None,
        (Some(value), Some(pinned), _) if kind.same(value, pinned) => return None,
        (Some(value), None, PinOrigin::Daemon) => (
            format!(
                "`{value}` is not pinned: the daemon sends a connection's secret only where its operator pinned it"
            ),
            format!("if this is right, the operator restarts capstan with --pin {field}={value}"),
        ),
        (Some(value), Some(pinned), PinOrigin::Daemon) => (
            format!(
                "`{value}` is not the pinned `{pinned}`: this revision would send the connection's secret elsewhere and is not applied"
            ),
            format!(
                "put back `{pinned}`; if the server really moved, the operator restarts capstan with --pin {field}={value}"
            ),
        ),
        (None, Some(pinned), PinOrigin::Daemon) => (
            format!("is unset, but the daemon pins `{pinned}`"),
            format!("set it to `{pinned}`, or the operator restarts capstan without --pin {field}"),
        ),
        (Some(value), None, PinOrigin::Base) => (
            format!("`{value}` is new in this change: the base revision has no {field}"),
            format!(
                "the daemon refuses this revision unless its operator pins the value first (--pin {field}={value})"
            ),
        ),
        (Some(value), Some(pinned), PinOrigin::Base) => (
            format!(
                "`{value}` changes the base revision's `{pinned}`: this connection's secret would go elsewhere"
            ),
            format!(
                "the daemon refuses this revision unless its operator pins the new value first (--pin {field}={value})"
            ),
        ),
        (None, Some(pinned), PinOrigin::Base) => (
            format!("this change removes `{pinned}`"),
            format!(
                "the daemon refuses this revision unless its operator drops --pin {field} first"
            ),
        ),
    };
    Some(file.error(field, message).with_hint(hint))
}

/// A preview admits both revisions as the daemon would ([`crate::preview::build`]).
impl crate::preview::Admit for Admission {
    fn load(&self, files: &RepoFiles) -> Loaded {
        Admission::load(self, files)
    }

    fn for_head(&self, base: &Loaded) -> Self {
        Admission::for_head(self, base)
    }
}

#[cfg(test)]
mod tests;
