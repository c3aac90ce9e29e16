//! `capstan lab`: serves the lab until SIGTERM or Ctrl-C, then stops cleanly (exit 0).
//!
//! It prints the simulated Proxmox's URL, certificate fingerprint, token id and token (a local
//! lab, so printing its own token is the point) and where each simulated cluster's admin
//! kubeconfig is, with a `kubectl` command to try. Programs read the same from `lab.json`,
//! which also lists the clusters `kubeadm init` creates later inside the lab's VMs.

use std::io::Write;

use crate::cli::LabArgs;
use crate::commands::Outcome;
use capstan_lab::kube::MANAGEMENT;
use capstan_lab::lab::{Lab, LabError, LabOptions};
use capstan_lab::world::{LabConfig, WorldError};

/// Running the lab failed.
#[derive(Debug, thiserror::Error)]
pub enum LabCommandError {
    /// The lab config could not be read.
    #[error("cannot load the lab config")]
    LoadConfig(#[source] WorldError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The lab could not start.
    #[error("cannot start the lab")]
    Start(#[source] LabError),
    /// Writing to standard output failed.
    #[error("cannot write to standard output")]
    Print(#[source] std::io::Error),
    /// The signal handlers could not be installed.
    #[error("cannot listen for SIGTERM")]
    Signal(#[source] std::io::Error),
}

/// Runs `capstan lab`.
///
/// # Errors
/// When the config is invalid, the address cannot be bound or the state cannot be written.
pub fn run(args: &LabArgs, out: &mut impl Write) -> Result<Outcome, LabCommandError> {
    let config = match &args.config {
        Some(path) => LabConfig::load(path).map_err(LabCommandError::LoadConfig)?,
        None => LabConfig::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(LabCommandError::Runtime)?;
    runtime.block_on(async {
        let options = LabOptions {
            listen: args.listen,
            state_dir: Some(args.state_dir.clone()),
            ..LabOptions::ephemeral()
        };
        let lab = Lab::start(config, options)
            .await
            .map_err(LabCommandError::Start)?;
        print_banner(&lab, out).map_err(LabCommandError::Print)?;
        wait_for_stop().await?;
        lab.stop();
        writeln!(out, "lab stopped").map_err(LabCommandError::Print)?;
        Ok(Outcome::Success)
    })
}

fn print_banner(lab: &Lab, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "capstan lab: simulated Proxmox VE")?;
    writeln!(out, "  url:         {}", lab.proxmox_url())?;
    writeln!(out, "  fingerprint: {}", lab.fingerprint())?;
    writeln!(out, "  token id:    {}", lab.token_id())?;
    writeln!(out, "  token:       {}", lab.token())?;
    if let Some(path) = lab.state_file() {
        writeln!(out, "  state:       {}", path.display())?;
    }
    writeln!(out)?;
    writeln!(out, "simulated Kubernetes clusters (admin kubeconfigs):")?;
    for name in lab.kube().names() {
        match lab.kubeconfig_path(&name) {
            Some(path) => writeln!(out, "  {name:<12} {}", path.display())?,
            None => writeln!(out, "  {name}")?,
        }
    }
    writeln!(
        out,
        "  (clusters that kubeadm init creates inside the VMs are added to lab.json)"
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "try: curl -k -H 'Authorization: PVEAPIToken={}={}' {}/api2/json/nodes",
        lab.token_id(),
        lab.token(),
        lab.proxmox_url()
    )?;
    if let Some(path) = lab.kubeconfig_path(MANAGEMENT) {
        writeln!(
            out,
            "try: kubectl --kubeconfig {} get nodes",
            shell_word(&path.display().to_string())
        )?;
    }
    writeln!(out, "stop with Ctrl-C or SIGTERM")?;
    out.flush()
}

/// `word` as one shell word (quoted only when it needs to be), so the hint can be pasted.
fn shell_word(word: &str) -> String {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c));
    if plain && !word.is_empty() {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

async fn wait_for_stop() -> Result<(), LabCommandError> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(LabCommandError::Signal)?;
        tokio::select! {
            _ = term.recv() => {}
            result = tokio::signal::ctrl_c() => result.map_err(LabCommandError::Signal)?,
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .map_err(LabCommandError::Signal)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_quote_paths_only_when_a_shell_needs_it() {
        assert_eq!(
            shell_word("/tmp/.lab/management.kubeconfig"),
            "/tmp/.lab/management.kubeconfig"
        );
        assert_eq!(shell_word("/tmp/my lab/x"), "'/tmp/my lab/x'");
        assert_eq!(shell_word("/tmp/it's"), "'/tmp/it'\\''s'");
    }
}
