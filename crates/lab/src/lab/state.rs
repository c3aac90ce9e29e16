//! The lab's state directory: `lab.json` and one admin kubeconfig per simulated cluster
//! (`<cluster>.kubeconfig`), rewritten whenever a cluster appears or its certificates change.
//!
//! # Invariants
//! - Files are replaced atomically (written aside, then renamed), so a reader polling them
//!   (kubectl, a test, `capstan run --lab`) never sees half a file.
//! - Every file is readable by its owner only: they hold the lab's token and admin keys.
//! - `lab.json` lists a cluster only once its kubeconfig file is written.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{LAB_FILE, LabCluster, LabError, LabFile, LabProxmox};
use crate::kube::{KubeLab, SimCluster};
use crate::talos::TalosApis;

/// Where a lab keeps its state, and what it writes there.
#[derive(Debug)]
pub(super) struct StateFiles {
    dir: Option<PathBuf>,
    lab_json: Option<PathBuf>,
    kube: Arc<KubeLab>,
    talos_apis: TalosApis,
    /// The Proxmox half of `lab.json`, known once the simulated Proxmox serves. The lock also
    /// serialises writers.
    proxmox: Mutex<Option<LabProxmox>>,
}

impl StateFiles {
    /// State files in `dir` (made absolute, so `lab.json`'s paths work from anywhere), or
    /// none.
    pub(super) fn new(dir: Option<&Path>, kube: Arc<KubeLab>, talos_apis: TalosApis) -> Self {
        let dir = dir.map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()));
        StateFiles {
            lab_json: dir.as_ref().map(|dir| dir.join(LAB_FILE)),
            dir,
            kube,
            talos_apis,
            proxmox: Mutex::new(None),
        }
    }

    pub(super) fn set_proxmox(&self, proxmox: LabProxmox) {
        *self.proxmox.lock().unwrap_or_else(PoisonError::into_inner) = Some(proxmox);
    }

    /// `<dir>/<cluster>.kubeconfig`, with a state directory.
    pub(super) fn kubeconfig_path(&self, cluster: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{cluster}.kubeconfig")))
    }

    /// `<dir>/lab.json`, with a state directory.
    pub(super) fn lab_json_path(&self) -> Option<&Path> {
        self.lab_json.as_deref()
    }

    fn clusters(&self) -> BTreeMap<String, LabCluster> {
        self.kube
            .names()
            .into_iter()
            .filter_map(|name| {
                let kubeconfig = self.kubeconfig_path(&name)?;
                let cluster = self.kube.cluster(&name)?;
                Some((name, lab_cluster(&cluster, kubeconfig)))
            })
            .collect()
    }

    /// What `lab.json` says now (`None` before the Proxmox half is known).
    pub(super) fn lab_file(&self) -> Option<LabFile> {
        let proxmox = self
            .proxmox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        Some(LabFile {
            proxmox,
            clusters: self.clusters(),
            talos_apis: self.talos_apis.listed(),
        })
    }

    /// Writes every cluster's kubeconfig, then `lab.json`. Without a state directory, or
    /// before the Proxmox half is known, writes what it can (nothing, or the kubeconfigs).
    ///
    /// # Errors
    /// When the directory or a file cannot be written.
    pub(super) fn sync(&self) -> Result<(), LabError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let proxmox = self.proxmox.lock().unwrap_or_else(PoisonError::into_inner);
        std::fs::create_dir_all(dir).map_err(|source| LabError::WriteState {
            path: dir.clone(),
            source,
        })?;
        let mut clusters = BTreeMap::new();
        for name in self.kube.names() {
            let Some(cluster) = self.kube.cluster(&name) else {
                continue;
            };
            let path = dir.join(format!("{name}.kubeconfig"));
            write_private(&path, cluster.admin_kubeconfig().as_bytes())?;
            clusters.insert(name, lab_cluster(&cluster, path));
        }
        if let Some(proxmox) = proxmox.clone() {
            let file = LabFile {
                proxmox,
                clusters,
                talos_apis: self.talos_apis.listed(),
            };
            write_private(&dir.join(LAB_FILE), &lab_json(&file))?;
        }
        Ok(())
    }
}

/// What `lab.json` says of `cluster`, whose kubeconfig is at `kubeconfig`.
fn lab_cluster(cluster: &SimCluster, kubeconfig: PathBuf) -> LabCluster {
    LabCluster {
        kubeconfig,
        endpoint: cluster
            .endpoint()
            .map(|(host, port)| format!("{host}:{port}")),
        address: cluster.endpoint().map(|_| cluster.local_addr()),
    }
}

/// `lab.json`'s text.
pub(super) fn lab_json(file: &LabFile) -> Vec<u8> {
    let mut text = serde_json::to_string_pretty(file).expect("lab.json is plain data");
    text.push('\n');
    text.into_bytes()
}

/// Replaces `path` with `content` atomically, readable by its owner only.
///
/// # Errors
/// When the file cannot be written or renamed into place.
pub(super) fn write_private(path: &Path, content: &[u8]) -> Result<(), LabError> {
    let wrap = |source| LabError::WriteState {
        path: path.to_owned(),
        source,
    };
    let mut aside = path.as_os_str().to_owned();
    aside.push(".tmp");
    let aside = PathBuf::from(aside);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&aside).map_err(wrap)?;
    out.write_all(content).map_err(wrap)?;
    drop(out);
    std::fs::rename(&aside, path).map_err(wrap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::LabClock;

    fn proxmox() -> LabProxmox {
        LabProxmox {
            url: "https://127.0.0.1:8006".into(),
            fingerprint: "AB".into(),
            token_id: "capstan@pve!lab".into(),
            token: "secret".into(),
        }
    }

    #[tokio::test]
    async fn sync_writes_a_kubeconfig_per_cluster_and_lists_it_in_lab_json() {
        let dir = tempfile::tempdir().expect("dir");
        let kube = Arc::new(
            KubeLab::start(LabClock::new(), &BTreeMap::new())
                .await
                .expect("kube"),
        );
        let state = StateFiles::new(
            Some(&dir.path().join("state")),
            Arc::clone(&kube),
            TalosApis::default(),
        );
        state.sync().expect("kubeconfigs only");
        let kubeconfig = dir.path().join("state/management.kubeconfig");
        assert!(kubeconfig.exists());
        assert!(!dir.path().join("state").join(LAB_FILE).exists());
        assert!(state.lab_file().is_none());

        state.set_proxmox(proxmox());
        state.sync().expect("everything");
        let text = std::fs::read_to_string(dir.path().join("state").join(LAB_FILE)).expect("read");
        let file: LabFile = serde_json::from_str(&text).expect("lab.json");
        assert_eq!(file, state.lab_file().expect("known"));
        assert_eq!(file.clusters["management"].kubeconfig, kubeconfig);
        let management = kube.management().expect("management");
        assert_eq!(
            std::fs::read_to_string(&kubeconfig).expect("kubeconfig"),
            management.admin_kubeconfig()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&kubeconfig).expect("meta").permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("state"))
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[tokio::test]
    async fn without_a_state_directory_nothing_is_written() {
        let kube = Arc::new(
            KubeLab::start(LabClock::new(), &BTreeMap::new())
                .await
                .expect("kube"),
        );
        let state = StateFiles::new(None, kube, TalosApis::default());
        state.set_proxmox(proxmox());
        state.sync().expect("nothing to do");
        assert_eq!(state.kubeconfig_path("management"), None);
        assert!(state.lab_file().expect("known").clusters.is_empty());
    }
}
