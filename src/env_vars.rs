//! Names of the environment variables capstan reads, in one place. Only `main` and `cli` read
//! them; everything below receives typed configuration.

/// Log filter, `tracing` `EnvFilter` syntax (e.g. `info,capstan=debug`).
pub const CAPSTAN_LOG: &str = "CAPSTAN_LOG";
/// Log format: `plain` or `json`.
pub const CAPSTAN_LOG_FORMAT: &str = "CAPSTAN_LOG_FORMAT";
/// Output format of commands that print a report: `text` or `json`.
pub const CAPSTAN_FORMAT: &str = "CAPSTAN_FORMAT";
/// The repository: a Git remote URL or a folder.
pub const CAPSTAN_REPO: &str = "CAPSTAN_REPO";
/// The Git branch followed.
pub const CAPSTAN_GIT_BRANCH: &str = "CAPSTAN_GIT_BRANCH";
/// The folder of the Git repository holding `capstan.yaml`.
pub const CAPSTAN_GIT_PATH: &str = "CAPSTAN_GIT_PATH";
/// SSH private key file for the Git remote.
pub const CAPSTAN_GIT_SSH_KEY: &str = "CAPSTAN_GIT_SSH_KEY";
/// known_hosts file the Git remote's SSH host key must be in.
pub const CAPSTAN_GIT_KNOWN_HOSTS: &str = "CAPSTAN_GIT_KNOWN_HOSTS";
/// Where the HTTPS token comes from: `env:VAR` or `file:PATH`.
pub const CAPSTAN_GIT_TOKEN_FROM: &str = "CAPSTAN_GIT_TOKEN_FROM";
/// How the HTTPS token is sent: `basic` or `bearer`.
pub const CAPSTAN_GIT_TOKEN_AUTH: &str = "CAPSTAN_GIT_TOKEN_AUTH";
/// User name sent with the HTTPS token.
pub const CAPSTAN_GIT_USERNAME: &str = "CAPSTAN_GIT_USERNAME";
/// Where the bare mirrors of Git remotes are kept.
pub const CAPSTAN_GIT_MIRROR_DIR: &str = "CAPSTAN_GIT_MIRROR_DIR";
/// Where the webhook secret comes from: `env:VAR` or `file:PATH`.
pub const CAPSTAN_WEBHOOK_SECRET_FROM: &str = "CAPSTAN_WEBHOOK_SECRET_FROM";
/// `capstan lab`: where the simulated Proxmox listens.
pub const CAPSTAN_LAB_LISTEN: &str = "CAPSTAN_LAB_LISTEN";
/// `capstan lab`: where `lab.json` is written.
pub const CAPSTAN_LAB_STATE_DIR: &str = "CAPSTAN_LAB_STATE_DIR";
/// `capstan lab`: the lab config file describing the world.
pub const CAPSTAN_LAB_CONFIG: &str = "CAPSTAN_LAB_CONFIG";
/// The observed-state snapshot `capstan plan` reads (`none` for nothing).
pub const CAPSTAN_OBSERVED: &str = "CAPSTAN_OBSERVED";
/// `capstan run`: work against an embedded lab.
pub const CAPSTAN_LAB: &str = "CAPSTAN_LAB";
/// `capstan run` without `--lab`: the state folder of a lab whose API addresses to dial.
pub const CAPSTAN_LAB_ADDRESSES: &str = "CAPSTAN_LAB_ADDRESSES";
/// The daemon's HTTP endpoint address.
pub const CAPSTAN_HTTP: &str = "CAPSTAN_HTTP";
/// Where the bearer token of `/status`, `/observed` and `/metrics` comes from: `env:VAR` or
/// `file:PATH`.
pub const CAPSTAN_HTTP_TOKEN_FROM: &str = "CAPSTAN_HTTP_TOKEN_FROM";
/// The certificate chain the HTTP endpoint serves HTTPS with.
pub const CAPSTAN_HTTP_TLS_CERT: &str = "CAPSTAN_HTTP_TLS_CERT";
/// The private key of that certificate.
pub const CAPSTAN_HTTP_TLS_KEY: &str = "CAPSTAN_HTTP_TLS_KEY";
/// The CA whose client certificates authenticate callers of the HTTP endpoint.
pub const CAPSTAN_HTTP_CLIENT_CA: &str = "CAPSTAN_HTTP_CLIENT_CA";
/// A certificate revocation list (PEM or DER) of the client CA: certificates it lists are
/// refused in the handshake.
pub const CAPSTAN_HTTP_CLIENT_CRL: &str = "CAPSTAN_HTTP_CLIENT_CRL";
/// Host names (besides loopback and IP addresses) the HTTP endpoint answers to.
pub const CAPSTAN_HTTP_ALLOWED_HOSTS: &str = "CAPSTAN_HTTP_ALLOWED_HOSTS";
/// `/events` streams the HTTP endpoint holds open at once.
pub const CAPSTAN_HTTP_MAX_EVENT_STREAMS: &str = "CAPSTAN_HTTP_MAX_EVENT_STREAMS";
/// `/events` streams one client address may hold open at once.
pub const CAPSTAN_HTTP_MAX_EVENT_STREAMS_PER_CLIENT: &str =
    "CAPSTAN_HTTP_MAX_EVENT_STREAMS_PER_CLIENT";
/// The address the webhooks are served on (instead of the HTTP endpoint's).
pub const CAPSTAN_HOOKS_LISTEN: &str = "CAPSTAN_HOOKS_LISTEN";
/// How long a request's head or a webhook's body may take to arrive.
pub const CAPSTAN_HTTP_READ_TIMEOUT: &str = "CAPSTAN_HTTP_READ_TIMEOUT";
/// Connections each HTTP listener serves at once.
pub const CAPSTAN_HTTP_MAX_CONNECTIONS: &str = "CAPSTAN_HTTP_MAX_CONNECTIONS";
/// `capstan status --server` and `capstan preview --server`: where the daemon's bearer token
/// comes from.
pub const CAPSTAN_SERVER_TOKEN_FROM: &str = "CAPSTAN_SERVER_TOKEN_FROM";
/// Delay between passes while work is in progress.
pub const CAPSTAN_BUSY_INTERVAL: &str = "CAPSTAN_BUSY_INTERVAL";
/// Clusters whose steps run at the same time.
pub const CAPSTAN_CONCURRENCY: &str = "CAPSTAN_CONCURRENCY";
/// Status changes within this window become one status commit.
pub const CAPSTAN_STATUS_DEBOUNCE: &str = "CAPSTAN_STATUS_DEBOUNCE";
/// The least time between two status commits.
pub const CAPSTAN_STATUS_MIN_INTERVAL: &str = "CAPSTAN_STATUS_MIN_INTERVAL";
/// `capstan demo`: its folder.
pub const CAPSTAN_DEMO_DIR: &str = "CAPSTAN_DEMO_DIR";
/// `capstan status`: the Git remote whose status branch is read (instead of a daemon).
pub const CAPSTAN_STATUS_REPO: &str = "CAPSTAN_STATUS_REPO";
/// `capstan status --repo`: the status branch.
pub const CAPSTAN_STATUS_BRANCH: &str = "CAPSTAN_STATUS_BRANCH";
/// `capstan status`: the daemon's endpoint.
pub const CAPSTAN_SERVER: &str = "CAPSTAN_SERVER";
/// `capstan suspend`: why (shown in the status).
pub const CAPSTAN_SUSPEND_REASON: &str = "CAPSTAN_SUSPEND_REASON";
/// `capstan suspend`: the user name sent with a bearer token (recorded as declared).
pub const CAPSTAN_USER: &str = "CAPSTAN_USER";
/// `capstan run`: elect a leader on a Lease before starting steps.
pub const CAPSTAN_LEADER_ELECT: &str = "CAPSTAN_LEADER_ELECT";
/// The Lease's namespace.
pub const CAPSTAN_LEASE_NAMESPACE: &str = "CAPSTAN_LEASE_NAMESPACE";
/// The Lease's name.
pub const CAPSTAN_LEASE_NAME: &str = "CAPSTAN_LEASE_NAME";
/// Kubeconfig of the cluster holding the Lease (default: the fleet's first management cluster).
pub const CAPSTAN_LEASE_KUBECONFIG: &str = "CAPSTAN_LEASE_KUBECONFIG";
/// This replica's identity in the Lease (default: host name and process id).
pub const CAPSTAN_LEASE_IDENTITY: &str = "CAPSTAN_LEASE_IDENTITY";
/// How long a Lease not renewed stays its holder's.
pub const CAPSTAN_LEASE_DURATION: &str = "CAPSTAN_LEASE_DURATION";
/// How often the leader renews the Lease.
pub const CAPSTAN_LEASE_RENEW: &str = "CAPSTAN_LEASE_RENEW";
/// How often a standby looks at the Lease.
pub const CAPSTAN_LEASE_RETRY: &str = "CAPSTAN_LEASE_RETRY";
/// `capstan preview`: the base revision (default: the `--branch`).
pub const CAPSTAN_PREVIEW_BASE: &str = "CAPSTAN_PREVIEW_BASE";
/// `capstan preview`: the head revision.
pub const CAPSTAN_PREVIEW_HEAD: &str = "CAPSTAN_PREVIEW_HEAD";
/// The forge previews are posted to: `github`, `gitea` or `gitlab`.
pub const CAPSTAN_FORGE: &str = "CAPSTAN_FORGE";
/// The forge's API base URL.
pub const CAPSTAN_FORGE_URL: &str = "CAPSTAN_FORGE_URL";
/// The forge repository, `OWNER/NAME`.
pub const CAPSTAN_FORGE_REPO: &str = "CAPSTAN_FORGE_REPO";
/// The forge token (read from the environment only, never from a flag).
pub const CAPSTAN_FORGE_TOKEN: &str = "CAPSTAN_FORGE_TOKEN";
/// `capstan preview`: the pull request to post to.
pub const CAPSTAN_PREVIEW_PR: &str = "CAPSTAN_PREVIEW_PR";
/// `capstan preview`: the running daemon whose observed state is planned against.
pub const CAPSTAN_PREVIEW_SERVER: &str = "CAPSTAN_PREVIEW_SERVER";
/// `capstan run`: post a preview on every open pull request.
pub const CAPSTAN_PREVIEWS: &str = "CAPSTAN_PREVIEWS";
/// `capstan run --previews` and `capstan preview`: how long planning a preview may take.
pub const CAPSTAN_PREVIEW_TIMEOUT: &str = "CAPSTAN_PREVIEW_TIMEOUT";
/// `capstan run --previews` and `capstan preview`: predicted steps a revision's plan may hold.
pub const CAPSTAN_PREVIEW_MAX_STEPS: &str = "CAPSTAN_PREVIEW_MAX_STEPS";
/// `capstan plan` and `capstan preview`: plan as of this time instead of now.
pub const CAPSTAN_NOW: &str = "CAPSTAN_NOW";
/// Hold the Lease through the pod's service account.
pub const CAPSTAN_LEASE_IN_CLUSTER: &str = "CAPSTAN_LEASE_IN_CLUSTER";
/// The prefix of the environment variables a repository may read secrets from.
pub const CAPSTAN_SECRETS_ENV_PREFIX: &str = "CAPSTAN_SECRETS_ENV_PREFIX";
/// The folder a repository may read secret files from.
pub const CAPSTAN_SECRETS_DIR: &str = "CAPSTAN_SECRETS_DIR";
/// Where connections' secrets may be sent: `FIELD=VALUE` pins, separated by `,`.
pub const CAPSTAN_PINS: &str = "CAPSTAN_PINS";
/// The namespaces cluster files may deliver their kubeconfig to, separated by `,`.
pub const CAPSTAN_DELIVERY_NAMESPACES: &str = "CAPSTAN_DELIVERY_NAMESPACES";
/// `capstan run`: the daemon's own configuration file (commit verification, ...).
pub const CAPSTAN_CONFIG: &str = "CAPSTAN_CONFIG";
