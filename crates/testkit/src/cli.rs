//! The command line as users run it: a scratch copy of `examples-repo/` to break on purpose,
//! and the real `capstan` binary run on it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A throwaway copy of `examples-repo/`.
pub struct ScratchRepo {
    dir: tempfile::TempDir,
}

impl ScratchRepo {
    /// Copies `examples-repo/` into a fresh temporary folder.
    pub fn from_examples() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(&examples_repo(), dir.path());
        ScratchRepo { dir }
    }

    /// The repository folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces the one occurrence of `from` with `to` in `file`, failing loudly when the text
    /// is not there (so a test never passes because its edit silently missed).
    pub fn edit(&self, file: &str, from: &str, to: &str) -> &Self {
        let path = self.path().join(file);
        let text = std::fs::read_to_string(&path).expect("read fixture");
        assert_eq!(
            text.matches(from).count(),
            1,
            "`{from}` must occur once in {file}"
        );
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write fixture");
        self
    }

    /// Writes a file (creating folders).
    pub fn write(&self, file: &str, text: &str) -> &Self {
        let path = self.path().join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write fixture");
        self
    }

    /// Removes a file.
    pub fn remove(&self, file: &str) -> &Self {
        std::fs::remove_file(self.path().join(file)).expect("remove fixture");
        self
    }

    /// Runs `capstan validate` on the repository.
    pub fn validate(&self) -> Run {
        capstan(&["validate", self.path().to_str().expect("utf-8 path")])
    }
}

/// The repository's `examples-repo/`.
pub fn examples_repo() -> PathBuf {
    workspace().join("examples-repo")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// What a run of the binary printed and how it exited.
pub struct Run {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Runs `command` (the binary, see [`command`]) to its end.
    pub fn of(command: &mut Command) -> Run {
        let output = command.output().expect("run capstan");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Asserts that stdout holds `needle`, printing everything when it does not.
    pub fn assert_reports(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "expected `{needle}` in the report:\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts the exit code.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// The workspace's root folder.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `capstan` binary Cargo built for the running test: `CARGO_BIN_EXE_capstan` when Cargo
/// sets it, else beside the test binary's `deps/` folder (where Cargo puts it).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_capstan") {
        return PathBuf::from(path);
    }
    let test = std::env::current_exe().expect("the test binary's path");
    let deps = test.parent().expect("the test binary's folder");
    let profile = if deps.ends_with("deps") {
        deps.parent().expect("the profile folder")
    } else {
        deps
    };
    profile.join(format!("capstan{}", std::env::consts::EXE_SUFFIX))
}

/// The `capstan` binary as a command, to add arguments to.
pub fn command() -> Command {
    Command::new(binary())
}

/// Runs the `capstan` binary with `args`.
pub fn capstan(args: &[&str]) -> Run {
    Run::of(command().args(args))
}

/// Runs the `capstan` binary with `args`, failing the test unless it succeeds; its stdout.
pub fn capstan_ok(args: &[&str]) -> String {
    let run = capstan(args);
    run.assert_code(0);
    run.stdout
}

/// `capstan preview` of branch `head` against `main` in `repo`, planned against the live daemon
/// at `server` at time `now`, in `format`, run off the async runtime (the daemon answers on it).
pub async fn preview(repo: &Path, head: &str, server: &str, now: &str, format: &str) -> Run {
    let args: Vec<String> = [
        "preview",
        "--repo",
        &repo.display().to_string(),
        "--base",
        "main",
        "--head",
        head,
        "--server",
        server,
        "--now",
        now,
        "--format",
        format,
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        capstan(&args)
    })
    .await
    .expect("the preview ran")
}
