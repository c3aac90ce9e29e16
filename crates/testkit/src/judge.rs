//! Third-party programs that judge the lab and capstan from outside (the stock kubectl, curl,
//! openssl, Debian's python3-proxmoxer, python3-github, gh, mariadb-server, gnupg, xorriso
//! and OpenSSH's ssh-keygen). A test that needs one asks [`present`] first: on a machine without it the test
//! says what it skipped (naming itself) and how to install it, and passes; with
//! `CAPSTAN_REQUIRE_JUDGES=1` (CI sets it) a missing judge fails the test, so CI never skips.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A third-party program used as a judge.
#[derive(Debug, Clone, Copy)]
pub enum Judge {
    /// The stock `kubectl`.
    Kubectl,
    /// `curl`.
    Curl,
    /// `openssl`.
    Openssl,
    /// Debian's `python3-proxmoxer` (with `/usr/bin/python3`).
    Proxmoxer,
    /// Debian's `python3-github` (PyGithub, with `/usr/bin/python3`).
    PyGithub,
    /// GitHub's CLI, `gh` (Debian's package `gh`).
    Gh,
    /// Debian's MariaDB server (`mariadb-install-db`, `mariadbd`, the `mariadb` client).
    Mariadb,
    /// Debian's `prometheus-alertmanager` (the server, and `amtool` to query it).
    Alertmanager,
    /// GnuPG's `gpg` (Debian's `gnupg`): signs commits, and judges them with `git verify-commit`.
    Gpg,
    /// OpenSSH's `ssh-keygen` (Debian's `openssh-client`): `git` signs and verifies SSH
    /// signatures through it.
    SshKeygen,
    /// GNU xorriso (Debian's `xorriso`): reads ISO 9660 images capstan writes.
    Xorriso,
}

impl Judge {
    fn name(self) -> &'static str {
        match self {
            Judge::Kubectl => "kubectl",
            Judge::Curl => "curl",
            Judge::Openssl => "openssl",
            Judge::Proxmoxer => "python3-proxmoxer",
            Judge::PyGithub => "python3-github",
            Judge::Gh => "gh",
            Judge::Mariadb => "mariadb-server",
            Judge::Alertmanager => "prometheus-alertmanager",
            Judge::Gpg => "gpg",
            Judge::SshKeygen => "ssh-keygen",
            Judge::Xorriso => "xorriso",
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            Judge::Kubectl => "put the kubectl binary on PATH",
            Judge::Curl => "apt-get install curl",
            Judge::Openssl => "apt-get install openssl",
            Judge::Proxmoxer => "apt-get install python3-proxmoxer",
            Judge::PyGithub => "apt-get install python3-github",
            Judge::Gh => "apt-get install gh",
            Judge::Mariadb => "apt-get install mariadb-server",
            Judge::Alertmanager => "apt-get install prometheus-alertmanager",
            Judge::Gpg => "apt-get install gnupg",
            Judge::SshKeygen => "apt-get install openssh-client",
            Judge::Xorriso => "apt-get install xorriso",
        }
    }

    fn probe(self) -> bool {
        let (program, args): (&str, &[&str]) = match self {
            Judge::Kubectl => ("kubectl", &["version", "--client"]),
            Judge::Curl => ("curl", &["--version"]),
            Judge::Openssl => ("openssl", &["version"]),
            Judge::Proxmoxer => ("/usr/bin/python3", &["-c", "import proxmoxer"]),
            Judge::PyGithub => ("/usr/bin/python3", &["-c", "import github"]),
            Judge::Gh => ("gh", &["--version"]),
            Judge::Mariadb => ("/usr/sbin/mariadbd", &["--version"]),
            Judge::Alertmanager => ("amtool", &["--version"]),
            Judge::Gpg => ("gpg", &["--version"]),
            // `ssh-keygen` has no version flag; `-Y` with no operation fails only when absent.
            Judge::SshKeygen => ("sh", &["-c", "command -v ssh-keygen"]),
            Judge::Xorriso => ("xorriso", &["-version"]),
        };
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    fn is_installed(self) -> bool {
        // One slot per judge: the last variant's index plus one, so a new judge cannot
        // overflow it.
        const JUDGES: usize = Judge::Xorriso as usize + 1;
        static FOUND: [OnceLock<bool>; JUDGES] = [const { OnceLock::new() }; JUDGES];
        *FOUND[self as usize].get_or_init(|| self.probe())
    }
}

/// Whether every judge in `judges` is installed. When one is not, says on the terminal (past
/// the test harness's capture, so a passing run still shows it) which test skipped and why;
/// panics instead when `CAPSTAN_REQUIRE_JUDGES` is set. The test is named after the thread
/// the test harness runs it on (see [`test_name`]).
pub fn present(judges: &[Judge]) -> bool {
    let missing: Vec<Judge> = judges
        .iter()
        .copied()
        .filter(|j| !j.is_installed())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let test = test_name();
    let list = missing
        .iter()
        .map(|judge| format!("{} ({})", judge.name(), judge.install_hint()))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        std::env::var_os("CAPSTAN_REQUIRE_JUDGES").is_none(),
        "{test}: missing {list}; CAPSTAN_REQUIRE_JUDGES is set, so this fails instead of skipping"
    );
    let _ = writeln!(std::io::stderr(), "skipped {test}: missing {list}");
    false
}

/// The name of the running test: the test harness runs each test on a thread named after it
/// (`module::test_name`); "a test" on any other thread (a task of a multi-thread runtime).
pub fn test_name() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" && !name.starts_with("tokio-runtime") => name.to_owned(),
        _ => "a test".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_named_after_its_thread() {
        assert_eq!(
            test_name(),
            "judge::tests::a_test_is_named_after_its_thread"
        );
    }

    #[test]
    fn a_thread_of_its_own_has_no_test_name() {
        let name = std::thread::Builder::new()
            .name("tokio-runtime-worker".to_owned())
            .spawn(test_name)
            .expect("a thread")
            .join()
            .expect("it ends");
        assert_eq!(name, "a test");
    }
}
