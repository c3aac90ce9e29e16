//! `capstan observe`: one observation, printed as the snapshot `capstan plan --observed` reads.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::ObserveArgs;
use crate::clock::{Clock, SystemClock};
use crate::commands::Outcome;
use crate::connect::{ConnectError, Connections};
use crate::observe::{ObserveSettings, Observer};
use crate::secrets::{Limits, SecretReader};
use crate::source::{self, SettingsError};
use crate::spec;
#[cfg(feature = "lab")]
use capstan_lab::kube::MANAGEMENT;
#[cfg(feature = "lab")]
use capstan_lab::lab::{ApiAddresses, LabFile};

/// Observing failed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The repository could not be read.
    #[error("cannot read the repository")]
    Source(#[from] SettingsError),
    /// capstan.yaml has errors.
    #[error("the repository has errors (run `capstan validate`)")]
    Invalid,
    /// capstan.yaml asks for what the flags do not allow (a secret source, a connection not
    /// pinned).
    #[error("the secret policy and pins refuse the repository:\n{errors}")]
    Refused {
        /// Each refusal, with its file, line, field and the flag that would allow it.
        errors: String,
    },
    /// `--secrets-env-prefix`, `--secrets-dir` or `--pin` is unusable.
    #[error(transparent)]
    Limits(#[from] crate::secrets::LimitsError),
    /// The lab's state could not be read.
    #[error("cannot read the lab's state {path} (is `capstan lab --state-dir` running there?)")]
    LabState {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// lab.json is not what `capstan lab` writes.
    #[error("{path} is not a lab.json: {reason}")]
    LabFile {
        /// The file.
        path: PathBuf,
        /// What in it does not parse.
        reason: String,
    },
    /// `--lab-state` was given to a build without the lab.
    #[error(
        "--lab-state needs the lab, which this build of capstan leaves out (built with --no-default-features); build it with `cargo build --features lab`"
    )]
    NoLab,
    /// The connections could not be built.
    #[error("cannot connect")]
    Connect(#[from] ConnectError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Writing to standard output failed.
    #[error("cannot write to standard output")]
    Print(#[source] std::io::Error),
}

/// Observes once and prints the snapshot; clusters that could not be observed go to standard
/// error and make the command exit 1.
///
/// # Errors
/// When the repository is invalid or the connections cannot be built.
pub fn run(
    args: &ObserveArgs,
    env: fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ObserveError> {
    let Limits { policy, admission } = args.secrets.limits(
        args.lab_state.is_some(),
        [crate::env_vars::CAPSTAN_FORGE_TOKEN.to_owned()],
    )?;
    let reader = SecretReader::new(policy, env);
    let files = source::read_once(&args.repo, &args.git.settings(), &env)?.files;
    let loaded = admission.load(&files);
    let Some(desired) = loaded.desired else {
        return Err(match spec::load(&files).desired {
            Some(_) => ObserveError::Refused {
                errors: loaded.diagnostics.to_string(),
            },
            None => ObserveError::Invalid,
        });
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ObserveError::Runtime)?;
    let observation = runtime.block_on(async {
        let connections = match &args.lab_state {
            Some(dir) => lab_connections(dir, &desired.fleet, reader).await?,
            None => {
                let secrets = crate::connect::resolve_secrets(&desired.fleet, &reader)?;
                Connections::from_fleet(&desired.fleet, &secrets, reader).await?
            }
        };
        let mut observer = Observer::new(Arc::new(connections));
        observer.set_settings(ObserveSettings {
            workloads: args.workloads,
        });
        Ok::<_, ObserveError>(observer.observe(&desired, SystemClock.now()).await)
    })?;
    let text = format!(
        "{:#}\n",
        serde_json::to_value(&observation.observed).unwrap_or_default()
    );
    out.write_all(text.as_bytes())
        .map_err(ObserveError::Print)?;
    for (cluster, reason) in &observation.failed {
        eprintln!("warning: cluster {cluster} could not be observed: {reason}");
    }
    Ok(if observation.failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// The connections to the lab whose state is in `dir` (`capstan lab --state-dir`).
#[cfg(feature = "lab")]
async fn lab_connections(
    dir: &std::path::Path,
    fleet: &spec::Fleet,
    reader: SecretReader,
) -> Result<Connections, ObserveError> {
    let (lab, management) = read_lab(dir)?;
    let passwords = crate::connect::datastore_passwords(fleet, &reader)?;
    let addresses = ApiAddresses::from_lab_file(&lab);
    Ok(Connections::for_lab(fleet, &lab, &management, addresses)
        .await?
        .with_secret_reader(reader)
        .with_datastores(fleet, &passwords)?)
}

#[cfg(not(feature = "lab"))]
#[allow(clippy::unused_async)] // the same signature as the lab's
async fn lab_connections(
    _: &std::path::Path,
    _: &spec::Fleet,
    _: SecretReader,
) -> Result<Connections, ObserveError> {
    Err(ObserveError::NoLab)
}

#[cfg(feature = "lab")]
fn read_lab(dir: &std::path::Path) -> Result<(LabFile, String), ObserveError> {
    let path = dir.join("lab.json");
    let text = std::fs::read_to_string(&path).map_err(|source| ObserveError::LabState {
        path: path.clone(),
        source,
    })?;
    let lab: LabFile = serde_json::from_str(&text).map_err(|err| ObserveError::LabFile {
        path: path.clone(),
        reason: err.to_string(),
    })?;
    let management = lab
        .clusters
        .get(MANAGEMENT)
        .ok_or_else(|| ObserveError::LabFile {
            path: path.clone(),
            reason: format!("it lists no `{MANAGEMENT}` cluster"),
        })?;
    let kubeconfig = std::fs::read_to_string(&management.kubeconfig).map_err(|source| {
        ObserveError::LabState {
            path: management.kubeconfig.clone(),
            source,
        }
    })?;
    Ok((lab, kubeconfig))
}
