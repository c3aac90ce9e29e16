//! `capstan schema`: print or write the JSON Schemas generated from the spec types.

use std::io::Write;

use crate::cli::SchemaArgs;
use crate::spec;

/// Writing the schemas failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A schema file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// The text of one schema file, as committed in `schemas/` (pretty JSON, trailing newline).
pub fn render(schema: &serde_json::Value) -> String {
    format!("{schema:#}\n")
}

/// Prints the schemas to `out`, or writes them into `args.out`.
///
/// # Errors
/// When a file or stdout cannot be written.
pub fn run(args: &SchemaArgs, out: &mut impl Write) -> Result<(), SchemaError> {
    let observed = ("observed.schema.json", crate::observed::json_schema());
    let files = spec::json_schemas()
        .into_iter()
        .chain([observed])
        .map(|(name, schema)| (name, render(&schema)));
    emit(
        files,
        args.out.as_deref(),
        |name, text| format!("# {name}\n{text}"),
        out,
    )
}

/// Prints the book's generated reference pages to `out`, or writes them into `args.out`.
///
/// # Errors
/// When a file or stdout cannot be written.
pub fn reference(
    args: &crate::cli::ReferenceArgs,
    out: &mut impl Write,
) -> Result<(), SchemaError> {
    emit(
        crate::reference::pages(),
        args.out.as_deref(),
        |name, text| format!("<!-- {name} -->\n{text}"),
        out,
    )
}

/// Writes each `(file name, text)` into `dir`, or prints it to `out` under the heading
/// `printed` gives it.
fn emit(
    files: impl IntoIterator<Item = (&'static str, String)>,
    dir: Option<&std::path::Path>,
    printed: impl Fn(&str, &str) -> String,
    out: &mut impl Write,
) -> Result<(), SchemaError> {
    for (name, text) in files {
        match dir {
            Some(dir) => {
                let path = dir.join(name);
                std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(&path, text))
                    .map_err(|source| SchemaError::Write { path, source })?;
            }
            None => out
                .write_all(printed(name, &text).as_bytes())
                .map_err(|source| SchemaError::Write {
                    path: "stdout".into(),
                    source,
                })?,
        }
    }
    Ok(())
}
