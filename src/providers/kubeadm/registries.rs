//! `kubernetes.registries` as CRI-O reads it on a kubeadm node: the mirrors in a
//! `containers-registries.conf.d(5)` drop-in ([`REGISTRIES_CONF`], TOML: a `[[registry]]` per
//! mirrored registry, a `[[registry.mirror]]` per endpoint in order, `insecure` for an
//! `http://` one), the credentials in a `containers-auth.json(5)` file ([`AUTH_FILE`], 0600)
//! that a CRI-O drop-in ([`CRIO_AUTH_CONF`]) names as its `global_auth_file`, and each CA in
//! `containers-certs.d(5)` (`/etc/containers/certs.d/HOST[:PORT]/ca.crt`).
//!
//! The files are written before the node's packages are installed, so CRI-O reads them at its
//! first start; a change replaces the machines (the registries are part of their spec hash).
//! The password is only ever in [`AUTH_FILE`], never on a command line.

use base64::Engine as _;

use super::{NodeStep, write_file};
use crate::providers::node_exec::FileMode;
use crate::spec::registries::{ResolvedRegistries, endpoint};

/// The mirrors, as a drop-in of `/etc/containers/registries.conf`.
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf.d/50-capstan.conf";
/// CRI-O's drop-in that points `global_auth_file` at [`AUTH_FILE`].
pub const CRIO_AUTH_CONF: &str = "/etc/crio/crio.conf.d/50-capstan-registries.conf";
/// The credentials, in `containers-auth.json(5)`'s format (mode 0600).
pub const AUTH_FILE: &str = "/etc/crio/auth.json";
/// Where `containers-certs.d(5)` looks for a registry host's CAs.
pub const CERTS_DIR: &str = "/etc/containers/certs.d";

/// A TOML basic string (JSON's escapes are TOML's, and `serde_json` writes no `\/`).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises as JSON")
}

/// The registries drop-in for `registries`' mirrors.
pub fn registries_conf(registries: &ResolvedRegistries) -> String {
    let mut out = String::from(
        "# Written by capstan from kubernetes.registries: a change replaces the machine.\n",
    );
    for (registry, endpoints) in &registries.mirrors {
        out.push_str(&format!(
            "\n[[registry]]\nprefix = {name}\nlocation = {name}\n",
            name = toml_string(registry)
        ));
        for url in endpoints {
            // Validation let only `http(s)://HOST[:PORT]` through.
            let Some(mirror) = endpoint(url) else {
                continue;
            };
            out.push_str(&format!(
                "\n[[registry.mirror]]\nlocation = {}\ninsecure = {}\n",
                toml_string(mirror.host),
                !mirror.tls
            ));
        }
    }
    out
}

/// `containers-auth.json(5)` with `registries`' credentials (`auth`: base64 of
/// `USER:PASSWORD`).
pub fn auth_file(registries: &ResolvedRegistries) -> String {
    let auths: serde_json::Map<String, serde_json::Value> = registries
        .credentials
        .iter()
        .map(|(host, credentials)| {
            let pair = format!("{}:{}", credentials.username, credentials.password);
            let auth = base64::engine::general_purpose::STANDARD.encode(pair);
            (host.clone(), serde_json::json!({ "auth": auth }))
        })
        .collect();
    let file = serde_json::json!({ "auths": auths });
    serde_json::to_string_pretty(&file).expect("JSON serialises") + "\n"
}

/// The files CRI-O reads `registries` from, to write before it is installed; none when the
/// cluster declares no registries.
pub fn files(registries: &ResolvedRegistries) -> Vec<NodeStep> {
    let mut steps = Vec::new();
    if !registries.mirrors.is_empty() {
        steps.push(write_file(
            REGISTRIES_CONF,
            FileMode::Config,
            registries_conf(registries),
        ));
    }
    if !registries.credentials.is_empty() {
        steps.push(write_file(
            AUTH_FILE,
            FileMode::Secret,
            auth_file(registries),
        ));
        steps.push(write_file(
            CRIO_AUTH_CONF,
            FileMode::Config,
            format!(
                "[crio.image]\nglobal_auth_file = {}\n",
                toml_string(AUTH_FILE)
            ),
        ));
    }
    for (host, pem) in &registries.ca {
        steps.push(write_file(
            &format!("{CERTS_DIR}/{host}/ca.crt"),
            FileMode::Config,
            pem.clone(),
        ));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::registries::ResolvedCredentials;

    fn registries() -> ResolvedRegistries {
        ResolvedRegistries {
            mirrors: [(
                "docker.io".to_owned(),
                vec![
                    "https://mirror.example:5000".to_owned(),
                    "http://10.0.0.9:5000".to_owned(),
                ],
            )]
            .into(),
            credentials: [(
                "mirror.example:5000".to_owned(),
                ResolvedCredentials {
                    username: "robot".to_owned(),
                    password: "s3cr3t".to_owned(),
                },
            )]
            .into(),
            ca: [(
                "mirror.example:5000".to_owned(),
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_owned(),
            )]
            .into(),
        }
    }

    #[test]
    fn mirrors_are_a_registries_conf_drop_in_in_order_http_ones_insecure() {
        assert_eq!(
            registries_conf(&registries()),
            "# Written by capstan from kubernetes.registries: a change replaces the machine.\n\
             \n[[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\n\
             \n[[registry.mirror]]\nlocation = \"mirror.example:5000\"\ninsecure = false\n\
             \n[[registry.mirror]]\nlocation = \"10.0.0.9:5000\"\ninsecure = true\n"
        );
    }

    #[test]
    fn credentials_are_a_containers_auth_file_of_mode_0600_that_crio_is_pointed_at() {
        let steps = files(&registries());
        let paths: Vec<(&str, u32)> = steps
            .iter()
            .filter_map(|step| match step {
                NodeStep::WriteFile { path, mode, .. } => Some((path.as_str(), mode.bits())),
                NodeStep::Run { .. } => None,
            })
            .collect();
        assert_eq!(
            paths,
            [
                (REGISTRIES_CONF, 0o644),
                (AUTH_FILE, 0o600),
                (CRIO_AUTH_CONF, 0o644),
                ("/etc/containers/certs.d/mirror.example:5000/ca.crt", 0o644),
            ]
        );
        let auth: serde_json::Value =
            serde_json::from_str(&auth_file(&registries())).expect("JSON");
        // base64 of "robot:s3cr3t"
        assert_eq!(
            auth["auths"]["mirror.example:5000"]["auth"],
            "cm9ib3Q6czNjcjN0"
        );
        assert!(
            !format!("{steps:?}").contains("s3cr3t"),
            "a step's Debug never shows a file's content"
        );
        assert!(files(&ResolvedRegistries::default()).is_empty());
    }
}
