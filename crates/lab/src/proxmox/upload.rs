//! `POST /nodes/{node}/storage/{storage}/upload` as Proxmox VE serves it.
//!
//! `pveproxy` reads the `multipart/form-data` body itself (`PVE/APIServer/AnyEvent.pm`,
//! `file_upload_multipart`): the file part must be the field `filename` (its file name becomes
//! the `filename` parameter), the other parts are parameters, and the file goes to a temporary
//! file whose name the handler gets as `tmpfilename`. The handler (`PVE/API2/Storage/Status.pm`
//! `upload`) checks the storage, normalises the file name, checks its extension against the
//! content type and the storage's content types, and copies the file in an `imgcopy` task.
//!
//! As on a real host, an existing volume is overwritten and a path in the file name is cut
//! off (`normalize_content_filename`). The lab keeps the temporary files in memory and bounds
//! an upload to [`UPLOAD_MAX_BYTES`], answering past it as a host whose `/var/tmp` is full.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, header};
use serde_json::Value;

use super::params::Params;
use super::reply::Reply;
use super::state::{ApiFail, Shared};
use super::storage::{content_dir, is_file_based, storage_path};
use super::tasks::{TaskEnd, start_task};
use super::volumes::StoredVolume;

/// The largest upload the lab takes (a NoCloud seed is kilobytes; an installer ISO would not
/// fit in memory).
pub const UPLOAD_MAX_BYTES: usize = 16 << 20;
/// Form fields beside the file may hold this much in all (`$limit_max_post`).
const MAX_FIELDS_BYTES: usize = 64 * 1024;
/// Parts of one upload.
const MAX_PARTS: usize = 16;
/// Uploads received and not yet taken by their call (a bound on a misbehaving client).
const MAX_PENDING: usize = 8;

fn fail(status: u16, message: impl Into<String>) -> ApiFail {
    ApiFail {
        status,
        message: message.into(),
        errors: BTreeMap::new(),
    }
}

/// The parameters of an upload request, as `pveproxy` hands them to the handler: the query's,
/// the form fields, `filename` from the file part, and `tmpfilename` naming where the file's
/// bytes wait (in [`super::volumes::Store::uploads`]).
pub(super) fn upload_params(
    shared: &Shared,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<BTreeMap<String, Value>, ApiFail> {
    let chunked = headers
        .get(header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        return Err(fail(501, "chunked transfer encoding not supported"));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = boundary(content_type).ok_or_else(|| {
        fail(
            501,
            format!("upload 'Content-Type '{content_type}' not implemented"),
        )
    })?;
    if body.len() > UPLOAD_MAX_BYTES {
        return Err(fail(
            501,
            "write to temporary file failed - No space left on device",
        ));
    }
    let form = parse_multipart(body, &boundary).ok_or_else(|| fail(501, "upload failed"))?;
    let mut params = BTreeMap::new();
    if let Some(query) = query {
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            params.insert(key.into_owned(), Value::String(value.into_owned()));
        }
    }
    for (key, value) in form.fields {
        params.insert(key, Value::String(value));
    }
    params.insert("filename".into(), Value::String(form.file_name));
    let mut state = shared.lock();
    state.store.next_upload += 1;
    let tmp = format!(
        "/var/tmp/pveupload-{:016x}{:016x}",
        state.store.next_upload,
        body.len()
    );
    while state.store.uploads.len() >= MAX_PENDING {
        state.store.uploads.pop_first();
    }
    state.store.uploads.insert(tmp.clone(), form.file);
    params.insert("tmpfilename".into(), Value::String(tmp));
    Ok(params)
}

/// The `boundary` of a `multipart/form-data` content type.
fn boundary(content_type: &str) -> Option<String> {
    let mut parts = content_type.split([';', ',']).map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    parts
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_owned())
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

/// A parsed upload form.
#[derive(Debug)]
struct Form {
    fields: BTreeMap<String, String>,
    file_name: String,
    file: Vec<u8>,
}

/// Parses a `multipart/form-data` body; `None` when `pveproxy` would abort the upload: no
/// file part, a file part not named `filename`, a part without disposition, too many parts or
/// too much form data.
fn parse_multipart(body: &[u8], boundary: &str) -> Option<Form> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut rest = &body[find(body, &delimiter)? + delimiter.len()..];
    let mut fields = BTreeMap::new();
    let mut fields_bytes = 0;
    let mut file = None;
    for _ in 0..MAX_PARTS {
        if rest.starts_with(b"--") {
            let (file_name, file) = file?;
            return Some(Form {
                fields,
                file_name,
                file,
            });
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .or_else(|| rest.strip_prefix(b"\n"))?;
        let header_end = find(rest, b"\r\n\r\n")?;
        let headers = std::str::from_utf8(&rest[..header_end]).ok()?;
        rest = &rest[header_end + 4..];
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(&delimiter);
        let end = find(rest, &closing)?;
        let content = &rest[..end];
        rest = &rest[end + closing.len()..];
        let (name, file_name) = disposition(headers)?;
        match file_name {
            Some(file_name) if name == "filename" && file.is_none() => {
                file = Some((file_name, content.to_vec()));
            }
            Some(_) => return None,
            None => {
                fields_bytes += content.len();
                if fields_bytes > MAX_FIELDS_BYTES {
                    return None;
                }
                fields.insert(name, String::from_utf8_lossy(content).into_owned());
            }
        }
    }
    None
}

/// The field name and file name of a part's `Content-Disposition: form-data` header.
fn disposition(headers: &str) -> Option<(String, Option<String>)> {
    let line = headers.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(value.trim())
    })?;
    let mut params = line.split(';').map(str::trim);
    if params.next()? != "form-data" {
        return None;
    }
    let mut name = None;
    let mut file_name = None;
    for param in params {
        if let Some(value) = param.strip_prefix("name=") {
            name = Some(value.trim_matches('"').to_owned());
        } else if let Some(value) = param.strip_prefix("filename=") {
            file_name = Some(value.trim_matches('"').to_owned());
        }
    }
    Some((
        name.filter(|n| !n.is_empty())?,
        file_name.filter(|f| !f.is_empty()),
    ))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// `PVE::Storage::normalize_content_filename`: the part after the last slash or backslash,
/// every character but `[a-zA-Z0-9_.-]` replaced by `_`.
fn normalize_filename(name: &str) -> String {
    let name = name.trim_end_matches(['\r', '\n']);
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` (normalised) has a name and an extension of the content type.
fn has_extension(name: &str, extensions: &[&str]) -> bool {
    let lower = name.to_ascii_lowercase();
    extensions
        .iter()
        .any(|ext| lower.len() > ext.len() && lower.ends_with(ext))
}

/// The upload call: checks as `Status.pm`'s `upload`, then an `imgcopy` task that stores the
/// file as `<storage>:<content>/<file name>` (overwriting one of that name).
pub(super) fn upload(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let node = p.node().to_owned();
    let storage = p.text("storage").unwrap_or_default().to_owned();
    let kind = state.storage_named(&storage)?.kind.clone();
    if !is_file_based(&kind) {
        return Err(ApiFail::die(format!(
            "can't upload to storage type '{kind}'"
        )));
    }
    let tmp = p
        .text("tmpfilename")
        .ok_or_else(|| ApiFail::die("missing temporary file name"))?
        .to_owned();
    let bytes = state
        .store
        .uploads
        .remove(&tmp)
        .ok_or_else(|| ApiFail::die(format!("temporary file '{tmp}' does not exist")))?;
    let filename = normalize_filename(p.text("filename").unwrap_or_default());
    let content = p.text("content").unwrap_or_default().to_owned();
    let fits = match content.as_str() {
        "iso" => has_extension(&filename, &[".iso", ".img"]),
        "vztmpl" => has_extension(&filename, &[".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"]),
        "import" => has_extension(&filename, &[".ova", ".qcow2", ".raw", ".vmdk"]),
        other => {
            return Err(ApiFail::param(
                "content",
                format!("upload content type '{other}' not allowed"),
            ));
        }
    };
    if !fits {
        let why = if content == "import" {
            "invalid filename or wrong extension"
        } else {
            "wrong file extension"
        };
        return Err(ApiFail::param("filename", why));
    }
    let holds = state
        .storages
        .get(&storage)
        .is_some_and(|s| s.content.contains(&content));
    if !holds {
        return Err(ApiFail::die(format!(
            "storage '{storage}' does not support '{content}' content"
        )));
    }
    let subdir = if content == "iso" {
        "iso"
    } else {
        content.as_str()
    };
    let volid = format!("{storage}:{subdir}/{filename}");
    let dest = format!(
        "{}/{}/{filename}",
        storage_path(&storage),
        content_dir(&content)
    );
    let scope = state.volume_scope(&storage, &node);
    let size = bytes.len();
    let room = state
        .storages
        .get(&storage)
        .map(|s| s.size_bytes)
        .unwrap_or(0)
        .saturating_sub(state.storage_used(&storage, &node));
    let ctime = shared.unix_now();
    let log = vec![
        format!("starting file import from: {tmp}"),
        format!("target node: {node}"),
        format!("target file: {dest}"),
        format!("file size is: {size}"),
        format!("command: cp -- {tmp} {dest}"),
    ];
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "imgcopy",
        "",
        user,
        shared.durations.config,
        log,
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            if size as u64 > room {
                return TaskEnd::failed(format!(
                    "import failed: cp: error writing '{dest}': No space left on device"
                ));
            }
            state.store.volumes.insert(
                (scope, volid),
                StoredVolume {
                    content,
                    bytes: Arc::new(bytes),
                    ctime,
                },
            );
            TaskEnd {
                log: vec!["finished file import successfully".into()],
                ..TaskEnd::default()
            }
        }),
    );
    Reply::data(Value::from(upid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, file, content) in parts {
            body.extend_from_slice(b"--XyZ\r\n");
            let disposition = match file {
                Some(file) => format!("form-data; name=\"{name}\"; filename=\"{file}\""),
                None => format!("form-data; name=\"{name}\""),
            };
            body.extend_from_slice(
                format!("Content-Disposition: {disposition}\r\n\r\n").as_bytes(),
            );
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        body
    }

    #[test]
    fn the_file_part_and_fields_are_read_exactly() {
        let data = b"\x00\x01CD001\r\n--not-the-boundary\r\n\xff";
        let form = parse_multipart(
            &body(&[
                ("content", None, b"iso"),
                ("filename", Some("seed.iso"), data),
            ]),
            "XyZ",
        )
        .expect("parsed");
        assert_eq!(form.fields["content"], "iso");
        assert_eq!(form.file_name, "seed.iso");
        assert_eq!(form.file, data);
    }

    #[test]
    fn uploads_pveproxy_aborts_are_refused() {
        let no_file = body(&[("content", None, b"iso")]);
        assert!(parse_multipart(&no_file, "XyZ").is_none());
        let wrong_field = body(&[("file", Some("seed.iso"), b"x")]);
        assert!(parse_multipart(&wrong_field, "XyZ").is_none());
        assert!(parse_multipart(b"garbage", "XyZ").is_none());
        assert_eq!(
            boundary("multipart/form-data; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert!(boundary("application/x-www-form-urlencoded").is_none());
    }

    #[test]
    fn file_names_are_normalised_as_pve_storage_does() {
        assert_eq!(normalize_filename("../../etc/x y.iso"), "x_y.iso");
        assert_eq!(normalize_filename("C:\\isos\\seed.iso"), "seed.iso");
        assert!(has_extension("seed.ISO", &[".iso", ".img"]));
        assert!(!has_extension(".iso", &[".iso"]));
        assert!(!has_extension("seed.iso.txt", &[".iso"]));
    }
}
