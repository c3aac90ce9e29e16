//! `run --lab` and `run --lab-addresses`: the daemon's wiring to a lab, in the default build
//! only (the `lab` feature); the production build refuses both (see `super`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capstan_lab::lab::{ApiAddresses, Lab, LabOptions};
use capstan_lab::world::LabConfig;

use super::{DaemonSource, LAB_BUSY_INTERVAL, RunError, election, serve_daemon, stop_signal};
use crate::cli::RunArgs;
use crate::clock::Clock;
use crate::connect::Connections;
use crate::daemon::DaemonOptions;
use crate::secrets::SecretReader;
use crate::spec::Fleet;

/// `run --lab`: the daemon against an embedded lab, on the lab's clock.
pub(super) async fn run_on_lab(
    args: &RunArgs,
    mut options: DaemonOptions,
    fleet: &Fleet,
    reader: &SecretReader,
    source: DaemonSource,
) -> Result<(), RunError> {
    let config = match &args.target.lab_config {
        Some(path) => LabConfig::load(path).map_err(RunError::LabConfig)?,
        None => LabConfig::default(),
    };
    let lab = start_lab(config, Some(args.target.state_dir.clone())).await?;
    options.busy_interval = args.daemon.busy_interval.map_or(LAB_BUSY_INTERVAL, |d| d.0);
    let _ = writeln!(
        std::io::stdout(),
        "lab: simulated Proxmox VE at {} (state in {})",
        lab.proxmox_url(),
        args.target.state_dir.display()
    );
    let election = election(&args.leader, Some(lab.management_kubeconfig())).await?;
    let connections = lab_connections(fleet, &lab, reader).await?;
    let clock: Arc<dyn Clock> = Arc::new(lab.clock().clone());
    serve_daemon(options, connections, clock, source, election, stop_signal()).await?;
    lab.stop();
    Ok(())
}

/// `run --lab-addresses DIR`: dial what a lab in another process serves where its `lab.json`
/// says.
#[allow(clippy::unnecessary_wraps)] // the build without the lab refuses here
pub(super) fn with_lab_addresses(
    connections: Connections,
    dir: &Path,
) -> Result<Connections, RunError> {
    Ok(connections.with_lab_addresses(ApiAddresses::from_state_dir(dir)))
}

/// The connections to `lab` for `fleet`. A lab's datastores are real MariaDB servers: their
/// admin passwords are read as for a real fleet (through `reader`, which also reads the
/// clusters' `endpointFrom`), and so known to the redactor.
pub(in crate::commands) async fn lab_connections(
    fleet: &Fleet,
    lab: &Lab,
    reader: &SecretReader,
) -> Result<Connections, RunError> {
    let passwords = crate::connect::datastore_passwords(fleet, reader)?;
    Ok(Connections::for_lab(
        fleet,
        &lab.lab_file(),
        &lab.management_kubeconfig(),
        lab.api_addresses(),
    )
    .await?
    .with_secret_reader(reader.clone())
    .with_datastores(fleet, &passwords)?)
}

pub(in crate::commands) async fn start_lab(
    config: LabConfig,
    state_dir: Option<PathBuf>,
) -> Result<Lab, RunError> {
    let options = LabOptions {
        state_dir,
        ..LabOptions::ephemeral()
    };
    Lab::start(config, options).await.map_err(RunError::Lab)
}
