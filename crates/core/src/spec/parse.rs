//! From the text of one file to its typed document, or to a diagnostic that names the line, the
//! column and the field, and suggests the closest known name for a misspelt one.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::diagnostic::{Diagnostic, SourceFile};
use super::locate::{Position, join, parent};
use super::types::API_VERSION;

/// The two fields every file starts with, read leniently to tell what the file is.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// Parses `text` as a document of `expected_kind`; `file` positions the findings.
pub fn parse_document<T: DeserializeOwned>(
    file: &SourceFile,
    text: &str,
    expected_kind: &str,
) -> Result<T, Box<Diagnostic>> {
    let is_blank = |line: &str| line.trim().is_empty() || line.trim_start().starts_with('#');
    if text.lines().all(is_blank) {
        let hint = format!(
            "start it with `apiVersion: {API_VERSION}` and `kind: {expected_kind}`, or delete it"
        );
        return Err(Box::new(
            Diagnostic::file_error(&file.name, "the file is empty").with_hint(hint),
        ));
    }
    let meta: TypeMeta =
        serde_saphyr::from_str(text).map_err(|err| serde_diagnostic(file, &err))?;
    if let Some(problem) = type_meta_problem(file, &meta, expected_kind) {
        return Err(Box::new(problem));
    }
    serde_saphyr::from_str(text).map_err(|err| serde_diagnostic(file, &err))
}

/// What is wrong with `apiVersion` and `kind`, if anything.
fn type_meta_problem(
    file: &SourceFile,
    meta: &TypeMeta,
    expected_kind: &str,
) -> Option<Diagnostic> {
    match (meta.api_version.as_deref(), meta.kind.as_deref()) {
        (None, _) => Some(
            Diagnostic::file_error(&file.name, "missing field `apiVersion`").with_hint(format!(
                "add `apiVersion: {API_VERSION}` at the top of the file"
            )),
        ),
        (Some(other), _) if other != API_VERSION => Some(
            file.error("apiVersion", format!("unknown apiVersion `{other}`"))
                .with_hint(format!("this capstan reads `apiVersion: {API_VERSION}`")),
        ),
        (_, None) => Some(
            Diagnostic::file_error(&file.name, "missing field `kind`")
                .with_hint(format!("add `kind: {expected_kind}` after apiVersion")),
        ),
        (_, Some(kind)) if kind != expected_kind => Some(
            file.error(
                "kind",
                format!("this file must be `kind: {expected_kind}`, not `{kind}`"),
            )
            .with_hint(kind_hint(expected_kind)),
        ),
        _ => None,
    }
}

fn kind_hint(expected_kind: &str) -> &'static str {
    if expected_kind == "Fleet" {
        "capstan.yaml at the repository root is the Fleet; clusters go in `clustersDir`"
    } else {
        "files in `clustersDir` each describe one cluster; the Fleet lives in capstan.yaml"
    }
}

/// Turns a serde error into a diagnostic: the message without its location suffix, the field
/// path found from the location, and a suggestion for an unknown field.
fn serde_diagnostic(file: &SourceFile, err: &serde_saphyr::Error) -> Box<Diagnostic> {
    let raw = err.without_snippet().to_string();
    let message = strip_location_suffix(&raw);
    let position = err.location().map(|loc| Position {
        line: loc.line() as usize,
        column: loc.column() as usize,
    });
    let located_path = position
        .and_then(|p| file.index.path_at(p))
        .map(str::to_owned);

    let (field, message, hint) = if let Some(unknown) = quoted_after(message, "unknown field `") {
        unknown_field(unknown, message, located_path)
    } else if let Some(missing) = quoted_after(message, "missing field `") {
        // serde reports a missing field at the mapping's first key: name the missing one.
        let section = located_path.as_deref().and_then(parent).unwrap_or("");
        let hint = format!("add `{missing}` (see examples-repo/ or `capstan schema`)");
        (
            Some(join(section, missing)),
            format!("missing field `{missing}`"),
            Some(hint),
        )
    } else {
        (located_path, plain_type_error(message), None)
    };

    Box::new(Diagnostic {
        line: position.map(|p| p.line),
        column: position.map(|p| p.column),
        field: field.filter(|f| !f.is_empty()),
        hint,
        ..Diagnostic::file_error(&file.name, message)
    })
}

fn unknown_field(
    unknown: &str,
    message: &str,
    located_path: Option<String>,
) -> (Option<String>, String, Option<String>) {
    let expected: Vec<&str> = message
        .split_once("expected one of ")
        .map(|(_, list)| {
            list.split(", ")
                .map(|name| name.trim_matches('`'))
                .collect()
        })
        .unwrap_or_default();
    let closest = expected
        .iter()
        // No field is long: a long name is compared with none (that cost its length times
        // every field's).
        .filter(|_| unknown.chars().count() <= MAX_FIELD_NAME)
        .map(|name| (strsim::jaro_winkler(unknown, name), *name))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name);
    let hint = match (closest, expected.is_empty()) {
        (Some(name), _) => Some(format!("did you mean `{name}`?")),
        (None, false) => Some(format!("known fields here: {}", expected.join(", "))),
        (None, true) => None,
    };
    (located_path, format!("unknown field `{unknown}`"), hint)
}

/// The longest field name compared with the known ones for a suggestion.
const MAX_FIELD_NAME: usize = 64;

fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.split_once(prefix)?.1;
    rest.split_once('`').map(|(name, _)| name)
}

fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(cut) => &message[..cut],
        None => message,
    }
}

/// serde-saphyr says `invalid u32`; a user thinks in YAML, not Rust types.
fn plain_type_error(message: &str) -> String {
    let plain = match message {
        "invalid u8" | "invalid u16" | "invalid u32" | "invalid u64" => {
            "expected a whole number (e.g. `3`)"
        }
        "invalid bool" | "invalid boolean" => "expected `true` or `false`",
        "expected string scalar" => "expected a single value here, not a list or a mapping",
        other => other,
    };
    plain.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::types::Cluster;

    fn parse(text: &str) -> Result<Cluster, Box<Diagnostic>> {
        parse_document(&SourceFile::new("clusters/x.yaml", text), text, "Cluster")
    }

    #[test]
    fn an_unknown_field_suggests_the_closest_name() {
        let text =
            "apiVersion: capstan.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspce: {}\n";
        let err = parse(text).expect_err("unknown field");
        assert_eq!(err.message, "unknown field `spce`");
        assert_eq!(err.hint.as_deref(), Some("did you mean `spec`?"));
        assert_eq!((err.line, err.column), (Some(4), Some(1)));
    }

    #[test]
    fn the_wrong_kind_is_named_with_where_it_belongs() {
        let text = "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n";
        let err = parse(text).expect_err("wrong kind");
        assert_eq!(err.field.as_deref(), Some("kind"));
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("kind: Cluster"), "{}", err.message);
    }

    #[test]
    fn an_empty_file_is_refused_plainly() {
        let err = parse("# nothing\n").expect_err("empty");
        assert_eq!(err.message, "the file is empty");
    }
}
