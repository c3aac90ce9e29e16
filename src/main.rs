//! The `capstan` binary: parse the command line, set up logging, run one command, map the
//! outcome to an exit code. The only place that uses `anyhow`.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use tracing_subscriber::EnvFilter;

use capstan::cli::{Args, Command, LogArgs, LogFormat};
use capstan::clock::SystemClock;
use capstan::commands::{self, Outcome};

fn main() -> ExitCode {
    let args = Args::parse();
    // One TLS crypto provider for every client and server (reqwest, kube, the lab): ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_logging(&args.log);
    match run(args) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {}", capstan::redact::redact(&format!("{err:#}")));
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> anyhow::Result<Outcome> {
    // Not locked: long-running commands print from several threads.
    let mut stdout = std::io::stdout();
    match args.command {
        Command::Validate(validate) => {
            commands::validate::run(&validate, &environment, &mut stdout)
                .with_context(|| format!("validating {}", validate.repo))
        }
        Command::Schema(schema) => commands::schema::run(&schema, &mut stdout)
            .map(|()| Outcome::Success)
            .map_err(Into::into),
        Command::Reference(reference) => commands::schema::reference(&reference, &mut stdout)
            .map(|()| Outcome::Success)
            .map_err(Into::into),
        Command::Plan(plan) => commands::plan::run(&plan, &SystemClock, &environment, &mut stdout)
            .with_context(|| format!("planning {}", plan.repo)),
        Command::Preview(preview) => {
            commands::preview::run(&preview, &SystemClock, &environment, &mut stdout)
                .with_context(|| format!("previewing {} in {}", preview.head, preview.repo))
        }
        Command::Run(run) => commands::run::run(&run, environment)
            .with_context(|| format!("running on {}", run.repo)),
        #[cfg(feature = "lab")]
        Command::Demo(demo) => commands::demo::demo(&demo, environment).context("running the demo"),
        #[cfg(not(feature = "lab"))]
        Command::Demo(_) => Err(commands::NoLab("demo").into()),
        Command::Status(status) => {
            commands::status::run(&status, &environment, &mut stdout).context("showing the status")
        }
        Command::Suspend(suspend) => {
            commands::actions::suspend(&suspend, &environment, &mut stdout).context("suspending")
        }
        Command::Resume(resume) => {
            commands::actions::resume(&resume, &environment, &mut stdout).context("resuming")
        }
        Command::Reconcile(reconcile) => {
            commands::actions::reconcile(&reconcile, &environment, &mut stdout)
                .context("asking for a reconcile")
        }
        Command::Observe(observe) => commands::observe::run(&observe, environment, &mut stdout)
            .with_context(|| format!("observing {}", observe.repo)),
        #[cfg(feature = "lab")]
        Command::Lab(lab) => commands::lab::run(&lab, &mut stdout).context("running the lab"),
        #[cfg(not(feature = "lab"))]
        Command::Lab(_) => Err(commands::NoLab("lab").into()),
    }
}

/// The process environment, for `tokenFrom: {env: ...}` and `env:` secrets: read here, in
/// main, only.
fn environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn init_logging(log: &LogArgs) {
    let filter = EnvFilter::try_new(&log.log).unwrap_or_else(|err| {
        eprintln!("warning: ignoring log filter `{}`: {err}", log.log);
        EnvFilter::new("warn")
    });
    // Colour only for a person at a terminal: a log file or collector gets plain text, and
    // JSON never carries escape sequences.
    let colour = log.log_format == LogFormat::Plain && std::io::stderr().is_terminal();
    // Every line goes through the redactor: no log call can leak a secret capstan knows.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(capstan::redact::LogWriter::new(std::io::stderr));
    match log.log_format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
