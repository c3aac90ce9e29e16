//! The command lines a simulated node understands, parsed with the real programs' flags: an
//! unknown flag or a missing argument fails as the real `kubeadm` or `kubectl` would, so capstan
//! cannot rely on something a real node would refuse.

use clap::{Args, Parser, Subcommand};

/// `kubeadm`, the subcommands capstan uses, with their real flags.
#[derive(Debug, Parser)]
#[command(
    name = "kubeadm",
    no_binary_name = true,
    disable_help_subcommand = true
)]
pub struct Kubeadm {
    /// The subcommand.
    #[command(subcommand)]
    pub command: KubeadmCommand,
}

/// kubeadm subcommands.
#[derive(Debug, Subcommand)]
pub enum KubeadmCommand {
    /// `kubeadm init`.
    Init(InitArgs),
    /// `kubeadm join`.
    Join(JoinArgs),
    /// `kubeadm reset`.
    Reset(ResetArgs),
    /// `kubeadm token`.
    Token {
        /// The token subcommand.
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// `kubeadm upgrade`.
    Upgrade {
        /// The upgrade subcommand.
        #[command(subcommand)]
        command: UpgradeCommand,
    },
    /// `kubeadm certs`.
    Certs {
        /// The certs subcommand.
        #[command(subcommand)]
        command: CertsCommand,
    },
    /// `kubeadm version`.
    Version {
        /// Output format.
        #[arg(short, long)]
        output: Option<String>,
    },
}

/// `kubeadm init [phase upload-certs]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InitArgs {
    /// `kubeadm init phase ...`.
    #[command(subcommand)]
    pub phase: Option<InitPhase>,
    /// Path to a kubeadm configuration file.
    #[arg(long)]
    pub config: Option<String>,
    /// Upload control-plane certificates to the kubeadm-certs Secret.
    #[arg(long)]
    pub upload_certs: bool,
    /// Preflight errors to ignore.
    #[arg(long)]
    pub ignore_preflight_errors: Option<String>,
}

/// `kubeadm init phase`.
#[derive(Debug, Subcommand)]
pub enum InitPhase {
    /// `kubeadm init phase <name>`.
    Phase {
        /// The phase.
        #[command(subcommand)]
        phase: PhaseName,
    },
}

/// The init phases capstan runs on their own.
#[derive(Debug, Subcommand)]
pub enum PhaseName {
    /// `kubeadm init phase upload-certs`.
    UploadCerts {
        /// Upload the certificates (without it the phase does nothing).
        #[arg(long)]
        upload_certs: bool,
    },
    /// `kubeadm init phase addon kube-proxy --config FILE`.
    Addon {
        /// Which addon: `kube-proxy`.
        which: String,
        /// Path to a kubeadm configuration file.
        #[arg(long)]
        config: Option<String>,
    },
    /// `kubeadm init phase upload-config kubeadm --config FILE`.
    UploadConfig {
        /// What to upload: `kubeadm` (the ClusterConfiguration).
        what: String,
        /// Path to a kubeadm configuration file.
        #[arg(long)]
        config: Option<String>,
    },
}

/// `kubeadm join`.
#[derive(Debug, Args)]
pub struct JoinArgs {
    /// Path to a kubeadm configuration file.
    #[arg(long)]
    pub config: Option<String>,
    /// `HOST:PORT` when joining without a configuration file.
    pub api_server_endpoint: Option<String>,
    /// Bootstrap token.
    #[arg(long)]
    pub token: Option<String>,
    /// CA public-key hash.
    #[arg(long)]
    pub discovery_token_ca_cert_hash: Vec<String>,
    /// Join as a control plane.
    #[arg(long)]
    pub control_plane: bool,
    /// Key to decrypt the uploaded control-plane certificates.
    #[arg(long)]
    pub certificate_key: Option<String>,
}

/// `kubeadm reset`.
#[derive(Debug, Args)]
pub struct ResetArgs {
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub force: bool,
}

/// `kubeadm token`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// `kubeadm token create`.
    Create {
        /// Token lifetime (`24h0m0s` by default).
        #[arg(long, default_value = "24h")]
        ttl: String,
        /// Print the whole join command.
        #[arg(long)]
        print_join_command: bool,
    },
}

/// `kubeadm upgrade`.
#[derive(Debug, Subcommand)]
pub enum UpgradeCommand {
    /// `kubeadm upgrade apply [VERSION] [--config FILE]`.
    Apply(UpgradeApply),
}

/// `kubeadm upgrade apply`'s arguments.
#[derive(Debug, Args)]
pub struct UpgradeApply {
    /// Target version, `vMAJOR.MINOR.PATCH` (else the `UpgradeConfiguration`'s).
    pub version: Option<String>,
    /// An `UpgradeConfiguration` (kubeadm.k8s.io/v1beta4): its `apply.kubernetesVersion` and
    /// `apply.skipPhases`.
    #[arg(long)]
    pub config: Option<String>,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    /// Renew certificates during the upgrade (kubeadm's default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub certificate_renewal: bool,
}

/// `kubeadm certs`.
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// `kubeadm certs renew all`.
    Renew {
        /// Which certificate (`all`).
        which: String,
    },
}

/// `kubectl`, the invocations capstan's node steps use.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl",
    no_binary_name = true,
    disable_help_subcommand = true
)]
pub struct Kubectl {
    /// Kubeconfig to use.
    #[arg(long, global = true)]
    pub kubeconfig: Option<String>,
    /// Namespace.
    #[arg(short, long, global = true)]
    pub namespace: Option<String>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: KubectlCommand,
}

/// kubectl subcommands.
#[derive(Debug, Subcommand)]
pub enum KubectlCommand {
    /// `kubectl apply -f FILE|URL`.
    Apply {
        /// What to apply.
        #[arg(short, long)]
        filename: String,
        /// Server-side apply.
        #[arg(long)]
        server_side: bool,
    },
    /// `kubectl exec POD -- COMMAND...`.
    Exec {
        /// The pod.
        pod: String,
        /// The command run in it.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// `kubectl get --raw PATH`.
    Get {
        /// Raw API path.
        #[arg(long)]
        raw: String,
    },
}

/// `etcdctl`, as run in the etcd pod.
#[derive(Debug, Parser)]
#[command(
    name = "etcdctl",
    no_binary_name = true,
    disable_help_subcommand = true
)]
pub struct Etcdctl {
    /// Endpoints.
    #[arg(long, global = true)]
    pub endpoints: Option<String>,
    /// CA certificate.
    #[arg(long, global = true)]
    pub cacert: Option<String>,
    /// Client certificate.
    #[arg(long, global = true)]
    pub cert: Option<String>,
    /// Client key.
    #[arg(long, global = true)]
    pub key: Option<String>,
    /// Output format.
    #[arg(short = 'w', long, global = true)]
    pub write_out: Option<String>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: EtcdctlCommand,
}

/// etcdctl subcommands.
#[derive(Debug, Subcommand)]
pub enum EtcdctlCommand {
    /// `etcdctl member ...`.
    Member {
        /// The member subcommand.
        #[command(subcommand)]
        command: MemberCommand,
    },
}

/// `etcdctl member` subcommands.
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// List members.
    List,
    /// Remove a member by hex id.
    Remove {
        /// Member id, hex.
        id: String,
    },
}

/// `k3s server` / `k3s agent` as the air-gap install script passes them on (its arguments after
/// `sh k3s-install.sh`), with the real flags. `K3S_URL` in the command's environment (`env
/// VAR=VALUE ...`) stands for `--server`, as K3s reads it; the lab applies it (never its own
/// process environment). The token and the datastore endpoint are K3s flags too, but the lab
/// refuses them on a command line: they belong in `/etc/rancher/k3s/config.yaml`.
#[derive(Debug, Parser)]
#[command(name = "k3s", no_binary_name = true, disable_help_subcommand = true)]
pub struct K3s {
    /// The subcommand.
    #[command(subcommand)]
    pub command: K3sCommand,
}

/// `k3s` subcommands.
#[derive(Debug, Subcommand)]
pub enum K3sCommand {
    /// `k3s server`: API server, controllers and kine.
    Server(K3sServerArgs),
    /// `k3s agent`: a kubelet joining a server.
    Agent(K3sAgentArgs),
}

/// `k3s server` flags.
#[derive(Debug, Args)]
pub struct K3sServerArgs {
    /// Shared secret servers and agents join with.
    #[arg(short = 't', long)]
    pub token: Option<String>,
    /// kine's datastore (`mysql://...`); without it, the embedded SQLite.
    #[arg(long)]
    pub datastore_endpoint: Option<String>,
    /// Extra names and addresses in the serving certificate.
    #[arg(long = "tls-san")]
    pub tls_san: Vec<String>,
    /// The node's address.
    #[arg(long)]
    pub node_ip: Option<String>,
    /// An existing server to join (embedded etcd only; ignored with a datastore).
    #[arg(short = 's', long)]
    pub server: Option<String>,
    /// Mode of `/etc/rancher/k3s/k3s.yaml`.
    #[arg(long)]
    pub write_kubeconfig_mode: Option<String>,
    /// Port the API server listens on.
    #[arg(long, default_value_t = 6443)]
    pub https_listen_port: u16,
    /// Node name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// The pod range (K3s's default 10.42.0.0/16).
    #[arg(long)]
    pub cluster_cidr: Option<String>,
    /// The service range (K3s's default 10.43.0.0/16).
    #[arg(long)]
    pub service_cidr: Option<String>,
    /// The cluster DNS Service's address (the tenth of the service range by default).
    #[arg(long)]
    pub cluster_dns: Option<String>,
    /// flannel's backend; `none` runs no flannel (another CNI is installed).
    #[arg(long)]
    pub flannel_backend: Option<String>,
    /// Runs no network policy controller (with `--flannel-backend none`).
    #[arg(long)]
    pub disable_network_policy: bool,
    /// Runs no kube-proxy (a CNI replaces it).
    #[arg(long)]
    pub disable_kube_proxy: bool,
    /// A label the kubelet registers with, `KEY=VALUE` (repeatable).
    #[arg(long = "node-label")]
    pub node_label: Vec<String>,
    /// A taint the kubelet registers with, `KEY[=VALUE]:EFFECT` (repeatable).
    #[arg(long = "node-taint")]
    pub node_taint: Vec<String>,
}

/// `k3s agent` flags.
#[derive(Debug, Args)]
pub struct K3sAgentArgs {
    /// The server's token.
    #[arg(short = 't', long)]
    pub token: Option<String>,
    /// The server to join, `https://HOST:6443`.
    #[arg(short = 's', long)]
    pub server: Option<String>,
    /// The node's address.
    #[arg(long)]
    pub node_ip: Option<String>,
    /// Node name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// A label the kubelet registers with, `KEY=VALUE` (repeatable).
    #[arg(long = "node-label")]
    pub node_label: Vec<String>,
    /// A taint the kubelet registers with, `KEY[=VALUE]:EFFECT` (repeatable).
    #[arg(long = "node-taint")]
    pub node_taint: Vec<String>,
}

/// Parses `args` (without the program name) as `P`, or gives the error the real program prints,
/// with its exit code.
pub fn parse<P: Parser>(program: &str, args: &[String]) -> Result<P, (i32, String)> {
    P::try_parse_from(args).map_err(|err| {
        let first = err
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .replace("error: ", "");
        (1, format!("{program}: {first}\n"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_commands_capstan_sends_parse_with_their_real_flags() {
        let init: Kubeadm = parse(
            "kubeadm",
            &words("init --config /etc/capstan/kubeadm-init.yaml --upload-certs"),
        )
        .expect("init");
        assert!(matches!(
            init.command,
            KubeadmCommand::Init(InitArgs {
                upload_certs: true,
                phase: None,
                ..
            })
        ));
        let upload: Kubeadm =
            parse("kubeadm", &words("init phase upload-certs --upload-certs")).expect("upload");
        assert!(matches!(
            upload.command,
            KubeadmCommand::Init(InitArgs { phase: Some(_), .. })
        ));
        let token: Kubeadm = parse(
            "kubeadm",
            &words("token create --ttl 30m --print-join-command"),
        )
        .expect("token");
        assert!(matches!(token.command, KubeadmCommand::Token { .. }));
        let upgrade: Kubeadm =
            parse("kubeadm", &words("upgrade apply v1.36.3 --yes")).expect("upgrade");
        assert!(matches!(
            upgrade.command,
            KubeadmCommand::Upgrade {
                command: UpgradeCommand::Apply(UpgradeApply { yes: true, .. })
            }
        ));
        let exec: Kubectl = parse(
            "kubectl",
            &words("--kubeconfig /etc/kubernetes/admin.conf -n kube-system exec etcd-a -- etcdctl member list"),
        )
        .expect("exec");
        assert!(
            matches!(exec.command, KubectlCommand::Exec { ref command, .. } if command[0] == "etcdctl")
        );
    }

    #[test]
    fn an_unknown_flag_fails_as_kubeadm_does() {
        let err = parse::<Kubeadm>("kubeadm", &words("init --confg x")).expect_err("unknown flag");
        assert_eq!(err.0, 1);
        assert!(err.1.contains("--confg"), "{}", err.1);
    }
}
