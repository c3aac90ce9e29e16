//! The connections a daemon works through: one Proxmox client per connection of `capstan.yaml`,
//! one Flux deliverer per management cluster, and a way to reach each workload cluster from its
//! admin kubeconfig. [`Providers`] is what observe and execute are generic over; [`Connections`]
//! is the real implementation, built from the fleet and the secrets `main` resolved, or from a
//! lab's `lab.json`.
//!
//! # Guarantees
//! An admin kubeconfig read from a VM is used only once [`Providers::admit_kubeconfig`] has
//! reduced it ([`AdminKubeconfig`]: inline certificates only, the server pinned to the
//! cluster's declared endpoint) and checked its CA against the one pinned for the cluster
//! ([`CaPins`]). Only the operator's kubeconfigs (management clusters) reach the kube crate
//! whole.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::fingerprint::FingerprintKey;
use crate::providers::datastore::{AdminAccess, DatastoreError};
use crate::providers::kube::{
    AdminKubeconfig, ApiEndpoint, ClusterClient, ClusterError, KubeClusterClient, KubeconfigRefused,
};
use crate::providers::proxmox::{
    ClientOptions, ConnectionConfig, ProxmoxClient, ProxmoxError, ProxmoxProvider, TokenSecret,
};
use crate::providers::talos::api::{GrpcTalosApi, TALOS_API_PORT, TalosApiError, TalosCredentials};
use crate::records::ca_pins::{CaPins, PinError, PinStore};
use crate::records::flux::{FluxDeliverer, KubeconfigDelivery};
use crate::secrets::{SecretError, SecretReader, SecretUse};
use crate::spec::{ClusterSpec, Fleet, SecretSource};
#[cfg(feature = "lab")]
use capstan_lab::lab::{ApiAddresses, LabFile};

/// Everything observe and execute reach the world through.
pub trait Providers: Send + Sync + 'static {
    /// A Proxmox VE client.
    type Proxmox: ProxmoxProvider + Clone + 'static;
    /// A client of one Kubernetes cluster.
    type Cluster: ClusterClient + 'static;
    /// Kubeconfig delivery to one management cluster.
    type Flux: KubeconfigDelivery + 'static;

    /// The client of a Proxmox connection named in `capstan.yaml`.
    fn proxmox(&self, connection: &str) -> Option<&Self::Proxmox>;

    /// Every Proxmox connection, by name.
    fn proxmox_connections(&self) -> Vec<&str>;

    /// The deliverer of a management cluster named in `capstan.yaml`.
    fn flux(&self, management_cluster: &str) -> Option<&Self::Flux>;

    /// A client of the management cluster `preferred` (when named and configured), else of
    /// the fleet's first one: where capstan keeps the Secrets it generates (K3s tokens).
    fn management(&self, preferred: Option<&str>) -> Option<&Self::Cluster>;

    /// The admin access of a datastore server named in `capstan.yaml` (`datastores:`).
    fn datastore(&self, server: &str) -> Option<&AdminAccess>;

    /// The kine DSN cluster `cluster` gives whole (`datastore.endpointFrom`), read now (a
    /// cluster may arrive with any commit) from where the operator's policy lets that cluster
    /// read it.
    ///
    /// # Errors
    /// When the policy refuses the source or it cannot be read.
    fn kine_dsn(&self, cluster: &str, source: &SecretSource) -> Result<String, SecretError>;

    /// The password cluster `cluster`'s nodes present to registry host `registry`
    /// (`kubernetes.registries.credentials.REGISTRY.passwordFrom`), read now from where the
    /// operator's policy lets that cluster read it; the redactor knows it from then on.
    ///
    /// # Errors
    /// When the policy refuses the source or it cannot be read.
    fn registry_password(
        &self,
        cluster: &str,
        registry: &str,
        source: &SecretSource,
    ) -> Result<String, SecretError>;

    /// The admin kubeconfig `read` from a VM of `cluster` (declared by `spec`), reduced to its
    /// server, CA and client certificate ([`AdminKubeconfig::reduce`]), with its server pinned
    /// to the declared endpoint and its CA to the one pinned for the cluster (pinned now if
    /// none is).
    ///
    /// # Errors
    /// [`AdmitError`]: a field capstan does not honour, another server, another CA, or a
    /// management cluster that cannot tell which CA is pinned.
    fn admit_kubeconfig(
        &self,
        cluster: &str,
        spec: &ClusterSpec,
        read: &str,
    ) -> impl Future<Output = Result<AdminKubeconfig, AdmitError>> + Send;

    /// Forgets the CA pinned for `cluster`, deleted; `management` is the management cluster
    /// its Flux Secret was on, if it had one (where its pin was kept).
    ///
    /// # Errors
    /// [`PinError`] when the record cannot be deleted.
    fn forget_ca(
        &self,
        cluster: &str,
        management: Option<&str>,
    ) -> impl Future<Output = Result<(), PinError>> + Send;

    /// A client of the cluster an admitted admin kubeconfig points at.
    fn connect_cluster(
        &self,
        kubeconfig: &AdminKubeconfig,
    ) -> impl Future<Output = Result<Self::Cluster, ClusterError>> + Send;

    /// A client of the Talos API of the node at `node` (port [`TALOS_API_PORT`]), with the
    /// cluster's `credentials`.
    ///
    /// # Errors
    /// [`TalosApiError`] when the node cannot be reached or refuses the credentials.
    fn talos_api(
        &self,
        node: IpAddr,
        credentials: &TalosCredentials,
    ) -> impl Future<Output = Result<GrpcTalosApi, TalosApiError>> + Send {
        GrpcTalosApi::connect(SocketAddr::new(node, TALOS_API_PORT), credentials)
    }
}

/// An admin kubeconfig read from a VM was not admitted. Messages name fields and
/// fingerprints, never the document's text.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// It names something capstan does not honour, or another server.
    #[error(transparent)]
    Refused(#[from] KubeconfigRefused),
    /// Its CA is not the pinned one, or the pin cannot be read.
    #[error(transparent)]
    Pin(#[from] PinError),
}

impl AdmitError {
    /// Whether retrying later may succeed (a management cluster that did not answer).
    pub fn is_transient(&self) -> bool {
        match self {
            AdmitError::Refused(_) => false,
            AdmitError::Pin(err) => err.is_transient(),
        }
    }
}

/// Building the connections failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A Proxmox connection is misconfigured.
    #[error("Proxmox connection `{connection}`")]
    Proxmox {
        /// Its name in `capstan.yaml`.
        connection: String,
        /// The Proxmox call that failed, and its cause.
        #[source]
        source: Box<ProxmoxError>,
    },
    /// A management cluster cannot be reached.
    #[error("management cluster `{cluster}`")]
    Management {
        /// Its name in `capstan.yaml`.
        cluster: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: Box<ClusterError>,
    },
    /// A datastore server's URL is not of the form `mysql://HOST[:PORT]`.
    #[error("datastore server `{server}`")]
    Datastore {
        /// Its name in `capstan.yaml`.
        server: String,
        /// The datastore operation that failed, and its cause.
        #[source]
        source: Box<DatastoreError>,
    },
    /// A secret named in `capstan.yaml` cannot be read.
    #[error("cannot read a secret capstan.yaml names")]
    Secret(#[from] SecretError),
    /// A secret named in `capstan.yaml` was not resolved.
    #[error("no secret for {what}: set {hint}")]
    MissingSecret {
        /// What needs it.
        what: String,
        /// Where capstan.yaml says it comes from.
        hint: String,
    },
}

/// The secrets `main` read for the fleet (from the environment or files `tokenFrom` and
/// `kubeconfigFrom` name). `Debug` shows names only.
#[derive(Default, Clone)]
pub struct FleetSecrets {
    /// Proxmox token secrets by connection name.
    pub proxmox_tokens: BTreeMap<String, String>,
    /// Management-cluster kubeconfigs by name.
    pub management_kubeconfigs: BTreeMap<String, String>,
    /// Admin passwords of the K3s datastore servers (`datastores:`), by name.
    pub datastore_admin_passwords: BTreeMap<String, String>,
}

impl std::fmt::Debug for FleetSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSecrets")
            .field(
                "proxmox_tokens",
                &self.proxmox_tokens.keys().collect::<Vec<_>>(),
            )
            .field(
                "management_kubeconfigs",
                &self.management_kubeconfigs.keys().collect::<Vec<_>>(),
            )
            .field(
                "datastore_admin_passwords",
                &self.datastore_admin_passwords.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The real connections.
#[derive(Debug, Clone)]
pub struct Connections {
    proxmox: BTreeMap<String, Arc<ProxmoxClient>>,
    flux: BTreeMap<String, Arc<FluxDeliverer<KubeClusterClient>>>,
    management: BTreeMap<String, KubeClusterClient>,
    datastores: BTreeMap<String, AdminAccess>,
    /// Reads the secrets a revision names after start (`endpointFrom`).
    secrets: SecretReader,
    /// Where a lab serves each cluster's endpoint (`run --lab`); `None` on a real fleet.
    lab_addresses: Option<Arc<dyn AddressBook>>,
    pins: Arc<CaPins>,
    /// What admitted kubeconfigs and the Flux deliverers fingerprint secrets with.
    fingerprints: FingerprintKey,
}

/// Where a lab serves what a fleet declares (a cluster's endpoint, a Talos node's API): the
/// declared host and port to the loopback address to dial instead. Only a lab has one.
pub trait AddressBook: std::fmt::Debug + Send + Sync {
    /// The address to dial for `host:port`, when the lab serves it.
    fn resolve(&self, host: &str, port: u16) -> Option<SocketAddr>;
}

#[cfg(feature = "lab")]
impl AddressBook for ApiAddresses {
    fn resolve(&self, host: &str, port: u16) -> Option<SocketAddr> {
        ApiAddresses::resolve(self, host, port)
    }
}

/// The key of the secret fingerprints of a daemon working on the lab `lab`: derived from the
/// lab's Proxmox token, as a real daemon's from its tokens.
#[cfg(feature = "lab")]
pub fn lab_fingerprint_key(lab: &LabFile) -> FingerprintKey {
    FingerprintKey::derive([lab.proxmox.token.trim().as_bytes()])
}

/// The key of a daemon's secret fingerprints, derived from its Proxmox tokens (by connection
/// name): secrets every replica of one deployment holds, that never leave it, so fingerprints
/// agree between replicas and across restarts, and change only when a token is rotated.
pub fn fingerprint_key(proxmox_tokens: &BTreeMap<String, String>) -> FingerprintKey {
    FingerprintKey::derive(
        proxmox_tokens
            .iter()
            .flat_map(|(name, token)| [name.as_bytes(), token.trim().as_bytes()]),
    )
}

impl Connections {
    /// Connections to what `fleet` names, with the secrets [`resolve_secrets`] read through
    /// `reader` (which also checks each `caFile`, and reads what later revisions name).
    ///
    /// # Errors
    /// When a secret is missing or a connection is misconfigured.
    pub async fn from_fleet(
        fleet: &Fleet,
        secrets: &FleetSecrets,
        reader: SecretReader,
    ) -> Result<Self, ConnectError> {
        let fingerprints = fingerprint_key(&secrets.proxmox_tokens);
        let mut proxmox = BTreeMap::new();
        for (name, connection) in &fleet.proxmox {
            let secret =
                secrets
                    .proxmox_tokens
                    .get(name)
                    .ok_or_else(|| ConnectError::MissingSecret {
                        what: format!("Proxmox connection `{name}`"),
                        hint: "its tokenFrom".to_owned(),
                    })?;
            let mut connection = connection.clone();
            if let Some(path) = &connection.ca_file {
                connection.ca_file = Some(reader.file(SecretUse::ProxmoxCa(name), path)?);
            }
            let config = ConnectionConfig::from_spec(&connection, TokenSecret::new(secret.clone()));
            proxmox.insert(
                name.clone(),
                proxmox_client(name, config, ClientOptions::default())?,
            );
        }
        let mut flux = BTreeMap::new();
        for name in fleet.management_clusters.keys() {
            let kubeconfig = secrets.management_kubeconfigs.get(name).ok_or_else(|| {
                ConnectError::MissingSecret {
                    what: format!("management cluster `{name}`"),
                    hint: "its kubeconfigFrom".to_owned(),
                }
            })?;
            flux.insert(
                name.clone(),
                flux_deliverer(name, kubeconfig, &fingerprints).await?,
            );
        }
        Connections::assemble(proxmox, flux, fingerprints)
            .with_secret_reader(reader)
            .with_datastores(fleet, &secrets.datastore_admin_passwords)
    }

    /// Connections to a lab: every Proxmox connection of `fleet` goes to the lab's Proxmox and
    /// every management cluster to the lab's `management` cluster (`management_kubeconfig`);
    /// each workload cluster's endpoint is dialled where `addresses` says the lab serves it.
    ///
    /// # Errors
    /// When the lab's access does not work.
    #[cfg(feature = "lab")]
    pub async fn for_lab(
        fleet: &Fleet,
        lab: &LabFile,
        management_kubeconfig: &str,
        addresses: ApiAddresses,
    ) -> Result<Self, ConnectError> {
        let mut proxmox = BTreeMap::new();
        for name in fleet.proxmox.keys() {
            let config = ConnectionConfig::new(
                &lab.proxmox.url,
                &lab.proxmox.token_id,
                TokenSecret::new(lab.proxmox.token.clone()),
                crate::providers::proxmox::Trust::Fingerprint(lab.proxmox.fingerprint.clone()),
            );
            proxmox.insert(
                name.clone(),
                proxmox_client(name, config, ClientOptions::for_lab())?,
            );
        }
        let fingerprints = lab_fingerprint_key(lab);
        let mut flux = BTreeMap::new();
        for name in fleet.management_clusters.keys() {
            flux.insert(
                name.clone(),
                flux_deliverer(name, management_kubeconfig, &fingerprints).await?,
            );
        }
        Ok(Connections::assemble(proxmox, flux, fingerprints).with_lab_addresses(addresses))
    }

    /// These connections, dialling each workload cluster's endpoint where `addresses` says a
    /// lab serves it (the operator's choice: `run --lab`, `run --lab-addresses`).
    #[must_use]
    pub fn with_lab_addresses(mut self, addresses: impl AddressBook + 'static) -> Self {
        self.lab_addresses = Some(Arc::new(addresses));
        self
    }

    fn assemble(
        proxmox: BTreeMap<String, Arc<ProxmoxClient>>,
        flux: BTreeMap<String, Arc<FluxDeliverer<KubeClusterClient>>>,
        fingerprints: FingerprintKey,
    ) -> Self {
        let management = flux
            .iter()
            .map(|(name, deliverer)| (name.clone(), deliverer.client().clone()))
            .collect();
        Connections {
            proxmox,
            flux,
            management,
            datastores: BTreeMap::new(),
            secrets: SecretReader::default(),
            lab_addresses: None,
            pins: Arc::default(),
            fingerprints,
        }
    }

    /// These connections, reading what revisions name after start (`endpointFrom`) through
    /// `reader` (the default reads nothing but variables of an empty environment).
    #[must_use]
    pub fn with_secret_reader(mut self, reader: SecretReader) -> Self {
        self.secrets = reader;
        self
    }

    /// Where capstan dials `spec`'s endpoint, and which servers a kubeconfig may name.
    fn api_endpoint(&self, spec: &ClusterSpec) -> ApiEndpoint {
        let (host, port) = (&spec.endpoint.host, spec.endpoint.port);
        let mut endpoint = ApiEndpoint::declared(host, port);
        if spec
            .kubernetes
            .distribution
            .capabilities()
            .admin_server_on_node_loopback
        {
            endpoint = endpoint.or_node_loopback();
        }
        match self
            .lab_addresses
            .as_ref()
            .and_then(|lab| lab.resolve(host, port))
        {
            Some(address) => endpoint.served_at(address),
            None => endpoint,
        }
    }

    /// Where a cluster's CA is pinned: the management cluster it delivers to (`preferred`),
    /// else the fleet's first one, else memory.
    fn pin_store(&self, preferred: Option<&str>) -> PinStore<'_, KubeClusterClient> {
        preferred
            .and_then(|name| self.management.get_key_value(name))
            .or_else(|| self.management.iter().next())
            .map_or(PinStore::Memory, |(name, client)| {
                PinStore::Management(name, client)
            })
    }

    /// These connections with the admin access of every datastore server of `fleet`, whose
    /// passwords [`datastore_passwords`] read (a lab's datastores are real servers too).
    ///
    /// # Errors
    /// When a password is missing or a server's URL is malformed.
    pub fn with_datastores(
        mut self,
        fleet: &Fleet,
        passwords: &BTreeMap<String, String>,
    ) -> Result<Self, ConnectError> {
        for (name, server) in &fleet.datastores {
            let password = passwords
                .get(name)
                .ok_or_else(|| ConnectError::MissingSecret {
                    what: format!("datastore server `{name}`"),
                    hint: "its adminPasswordFrom".to_owned(),
                })?;
            let access = AdminAccess::new(server, password.clone()).map_err(|source| {
                ConnectError::Datastore {
                    server: name.clone(),
                    source: Box::new(source),
                }
            })?;
            self.datastores.insert(name.clone(), access);
        }
        Ok(self)
    }
}

/// A Proxmox client for the connection `name`, from its (possibly invalid) configuration.
fn proxmox_client(
    name: &str,
    config: Result<ConnectionConfig, ProxmoxError>,
    options: ClientOptions,
) -> Result<Arc<ProxmoxClient>, ConnectError> {
    let wrap = |source: ProxmoxError| ConnectError::Proxmox {
        connection: name.to_owned(),
        source: Box::new(source),
    };
    let client = ProxmoxClient::new(&config.map_err(wrap)?, options).map_err(wrap)?;
    Ok(Arc::new(client))
}

/// A Flux deliverer through the management cluster `name`'s kubeconfig.
async fn flux_deliverer(
    name: &str,
    kubeconfig: &str,
    fingerprints: &FingerprintKey,
) -> Result<Arc<FluxDeliverer<KubeClusterClient>>, ConnectError> {
    crate::redact::remember_kubeconfig(kubeconfig);
    let client = KubeClusterClient::connect(kubeconfig)
        .await
        .map_err(|source| ConnectError::Management {
            cluster: name.to_owned(),
            source: Box::new(source),
        })?;
    Ok(Arc::new(FluxDeliverer::new(client, fingerprints.clone())))
}

impl Providers for Connections {
    type Proxmox = Arc<ProxmoxClient>;
    type Cluster = KubeClusterClient;
    type Flux = Arc<FluxDeliverer<KubeClusterClient>>;

    fn proxmox(&self, connection: &str) -> Option<&Self::Proxmox> {
        self.proxmox.get(connection)
    }

    fn proxmox_connections(&self) -> Vec<&str> {
        self.proxmox.keys().map(String::as_str).collect()
    }

    fn flux(&self, management_cluster: &str) -> Option<&Self::Flux> {
        self.flux.get(management_cluster)
    }

    fn management(&self, preferred: Option<&str>) -> Option<&Self::Cluster> {
        preferred
            .and_then(|name| self.management.get(name))
            .or_else(|| self.management.values().next())
    }

    fn datastore(&self, server: &str) -> Option<&AdminAccess> {
        self.datastores.get(server)
    }

    fn kine_dsn(&self, cluster: &str, source: &SecretSource) -> Result<String, SecretError> {
        self.secrets.read(SecretUse::KineDsn(cluster), source)
    }

    fn registry_password(
        &self,
        cluster: &str,
        registry: &str,
        source: &SecretSource,
    ) -> Result<String, SecretError> {
        self.secrets
            .read(SecretUse::RegistryPassword { cluster, registry }, source)
    }

    async fn admit_kubeconfig(
        &self,
        cluster: &str,
        spec: &ClusterSpec,
        read: &str,
    ) -> Result<AdminKubeconfig, AdmitError> {
        let admin = AdminKubeconfig::reduce(read, &self.api_endpoint(spec), &self.fingerprints)?;
        let delivers_to = spec.delivery.flux.as_ref().map(|f| f.cluster.as_str());
        self.pins
            .check(self.pin_store(delivers_to), cluster, &admin)
            .await?;
        Ok(admin)
    }

    async fn forget_ca(&self, cluster: &str, management: Option<&str>) -> Result<(), PinError> {
        self.pins.forget(self.pin_store(management), cluster).await
    }

    fn connect_cluster(
        &self,
        kubeconfig: &AdminKubeconfig,
    ) -> impl Future<Output = Result<Self::Cluster, ClusterError>> + Send {
        std::future::ready(KubeClusterClient::for_admin(kubeconfig))
    }

    /// In a lab, the node's Talos API is served at a loopback address of its own.
    async fn talos_api(
        &self,
        node: IpAddr,
        credentials: &TalosCredentials,
    ) -> Result<GrpcTalosApi, TalosApiError> {
        let dial = self
            .lab_addresses
            .as_ref()
            .and_then(|lab| lab.resolve(&node.to_string(), TALOS_API_PORT))
            .unwrap_or(SocketAddr::new(node, TALOS_API_PORT));
        GrpcTalosApi::connect_via(node, dial, credentials).await
    }
}

/// Reads the secrets `fleet` names (`tokenFrom`, `kubeconfigFrom`, `adminPasswordFrom`)
/// through `reader`, as the operator's policy allows.
///
/// # Errors
/// [`ConnectError::Secret`] naming the field, and the variable or file, that is refused,
/// unset or unreadable.
pub fn resolve_secrets(fleet: &Fleet, reader: &SecretReader) -> Result<FleetSecrets, ConnectError> {
    let mut secrets = FleetSecrets::default();
    for (name, connection) in &fleet.proxmox {
        let token = reader.read(SecretUse::ProxmoxToken(name), &connection.token_from)?;
        secrets.proxmox_tokens.insert(name.clone(), token);
    }
    for (name, management) in &fleet.management_clusters {
        let kubeconfig = reader.read(
            SecretUse::ManagementKubeconfig(name),
            &management.kubeconfig_from,
        )?;
        secrets
            .management_kubeconfigs
            .insert(name.clone(), kubeconfig);
    }
    secrets.datastore_admin_passwords = datastore_passwords(fleet, reader)?;
    Ok(secrets)
}

/// The admin passwords of the fleet's datastore servers (`adminPasswordFrom`), by name: what
/// `run --lab` needs too, since a lab's datastore is a real MariaDB.
///
/// # Errors
/// As [`resolve_secrets`].
pub fn datastore_passwords(
    fleet: &Fleet,
    reader: &SecretReader,
) -> Result<BTreeMap<String, String>, ConnectError> {
    fleet
        .datastores
        .iter()
        .map(|(name, server)| {
            let password = reader.read(
                SecretUse::DatastorePassword(name),
                &server.admin_password_from,
            )?;
            Ok((name.clone(), password))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::SecretPolicy;

    fn fleet() -> Fleet {
        let text = "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\nproxmox:\n  homelab:\n    url: https://pve1:8006\n    tokenId: capstan@pve!r\n    tokenFrom: {env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}\n";
        serde_saphyr::from_str(text).expect("fleet")
    }

    fn reader(env: &'static [(&'static str, &'static str)]) -> SecretReader {
        SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn a_datastore_admin_password_is_read_like_the_other_secrets_and_never_shown() {
        let mut fleet = fleet();
        fleet.datastores.insert(
            "mariadb".to_owned(),
            crate::spec::DatastoreServer {
                url: "mysql://db.lab.example:3306".to_owned(),
                admin_user: "root".to_owned(),
                admin_password_from: SecretSource::Env(
                    "CAPSTAN_DATASTORE_MARIADB_PASSWORD".to_owned(),
                ),
            },
        );
        let secrets = resolve_secrets(
            &fleet,
            &reader(&[
                ("CAPSTAN_PROXMOX_HOMELAB_TOKEN", "0f6c"),
                ("CAPSTAN_DATASTORE_MARIADB_PASSWORD", "r00t-pw\n"),
            ]),
        )
        .expect("resolved");
        assert_eq!(secrets.datastore_admin_passwords["mariadb"], "r00t-pw");
        assert!(!format!("{secrets:?}").contains("r00t"));
        let err = resolve_secrets(
            &fleet,
            &reader(&[("CAPSTAN_PROXMOX_HOMELAB_TOKEN", "0f6c")]),
        )
        .expect_err("unset");
        assert_eq!(
            crate::errors::error_chain(&err),
            "cannot read a secret capstan.yaml names: datastores.mariadb.adminPasswordFrom: the environment variable CAPSTAN_DATASTORE_MARIADB_PASSWORD is not set in capstan's environment"
        );
    }

    #[test]
    fn secrets_come_from_the_named_variable_and_a_missing_one_is_named() {
        let secrets = resolve_secrets(
            &fleet(),
            &reader(&[("CAPSTAN_PROXMOX_HOMELAB_TOKEN", " 0f6c-secret \n")]),
        )
        .expect("resolved");
        assert_eq!(secrets.proxmox_tokens["homelab"], "0f6c-secret", "trimmed");
        assert!(
            !format!("{secrets:?}").contains("0f6c"),
            "Debug never shows a secret"
        );

        let err = resolve_secrets(&fleet(), &reader(&[])).expect_err("unset");
        assert_eq!(
            crate::errors::error_chain(&err),
            "cannot read a secret capstan.yaml names: proxmox.homelab.tokenFrom: the environment variable CAPSTAN_PROXMOX_HOMELAB_TOKEN is not set in capstan's environment"
        );
    }

    #[test]
    fn a_token_from_a_variable_the_policy_refuses_is_never_read() {
        let mut fleet = fleet();
        if let Some(connection) = fleet.proxmox.get_mut("homelab") {
            connection.token_from = SecretSource::Env("CAPSTAN_FORGE_TOKEN".to_owned());
        }
        let err = resolve_secrets(&fleet, &reader(&[("CAPSTAN_FORGE_TOKEN", "forge-secret")]))
            .expect_err("refused");
        let shown = crate::errors::error_chain(&err);
        assert!(
            shown.contains("proxmox.homelab.tokenFrom: the daemon does not let the token of Proxmox connection `homelab` come from the environment variable CAPSTAN_FORGE_TOKEN"),
            "{shown}"
        );
        assert!(!shown.contains("forge-secret"));
    }
}
