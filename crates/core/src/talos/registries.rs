//! `kubernetes.registries` as Talos v1.13 says it (pure): one `RegistryMirrorConfig` document
//! per mirrored registry (its endpoints in order; Talos falls back to the registry itself), one
//! `RegistryAuthConfig` per host with credentials, one `RegistryTLSConfig` per host with a CA.
//! Each is a document of the machine config's YAML stream, valid under Talos's published
//! schema (`reference/config.schema.json`, tested); the machine config carries the password
//! as it carries the cluster's other secrets, and is never shown but rendered with a
//! placeholder ([`crate::spec::registries::ResolvedRegistries::placeholders`]).

use serde_json::{Value, json};

use crate::spec::registries::ResolvedRegistries;

/// The registry documents of `registries`, in a stable order (mirrors, credentials, CAs,
/// each by name).
pub fn documents(registries: &ResolvedRegistries) -> Vec<Value> {
    let mirrors = registries.mirrors.iter().map(|(registry, endpoints)| {
        let endpoints: Vec<Value> = endpoints.iter().map(|url| json!({"url": url})).collect();
        json!({
            "apiVersion": "v1alpha1",
            "kind": "RegistryMirrorConfig",
            "name": registry,
            "endpoints": endpoints,
        })
    });
    let auths = registries.credentials.iter().map(|(host, credentials)| {
        json!({
            "apiVersion": "v1alpha1",
            "kind": "RegistryAuthConfig",
            "name": host,
            "username": credentials.username,
            "password": credentials.password,
        })
    });
    let authorities = registries.ca.iter().map(|(host, pem)| {
        json!({
            "apiVersion": "v1alpha1",
            "kind": "RegistryTLSConfig",
            "name": host,
            "ca": pem,
        })
    });
    mirrors.chain(auths).chain(authorities).collect()
}

/// `config` (a rendered machine config) with the registry documents of `registries` after
/// its own.
///
/// # Errors
/// The YAML serializer's words, should it refuse a document (every value is a string).
pub fn append(config: &mut String, registries: &ResolvedRegistries) -> Result<(), String> {
    for document in documents(registries) {
        let yaml = serde_saphyr::to_string(&document).map_err(|err| err.to_string())?;
        config.push_str("---\n");
        config.push_str(&yaml);
        if !config.ends_with('\n') {
            config.push('\n');
        }
    }
    Ok(())
}
