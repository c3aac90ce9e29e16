//! A Talos cluster's secrets bundle as plain data (pure): what every machine config is rendered
//! from. The daemon generates it once (core takes no randomness) and keeps it in the management
//! cluster; this module only holds it, checks its shape and (de)serializes it.
//!
//! Nothing here prints a secret: `Debug` shows each field as `***`, and [`SecretsBundle::check`]
//! names a malformed field, never its value.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The version of the serialized bundle; a reader refuses another.
pub const BUNDLE_FORMAT: u32 = 1;

/// A certificate authority: its certificate and private key, both PEM.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateAuthority {
    /// The CA certificate, PEM (`-----BEGIN CERTIFICATE-----`).
    pub certificate_pem: String,
    /// The CA's private key, PEM (PKCS#8 or SEC1).
    pub key_pem: String,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field(
                "certificate_pem",
                &format_args!("{} bytes", self.certificate_pem.len()),
            )
            .field("key_pem", &format_args!("***"))
            .finish()
    }
}

/// Everything secret a Talos cluster's machine configs carry, as Talos's own `secrets.yaml`
/// holds it (`talosctl gen secrets`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretsBundle {
    /// [`BUNDLE_FORMAT`] when written.
    pub format: u32,
    /// The cluster's identity for Talos's discovery (`cluster.id`, 32 random bytes, base64).
    pub cluster_id: String,
    /// The discovery encryption key (`cluster.secret`, 32 random bytes, base64).
    pub cluster_secret: String,
    /// The Kubernetes bootstrap token (`cluster.token`, `[a-z0-9]{6}.[a-z0-9]{16}`).
    pub bootstrap_token: String,
    /// The key encrypting Secrets at rest in etcd (`cluster.secretboxEncryptionSecret`, 32
    /// random bytes, base64).
    pub secretbox_encryption_secret: String,
    /// The token machines join trustd with (`machine.token`, `[a-z0-9]{6}.[a-z0-9]{16}`).
    pub trustd_token: String,
    /// The Talos API's CA (`machine.ca`, Ed25519, as Talos makes it); signs `os:admin` clients.
    pub os_ca: CertificateAuthority,
    /// The Kubernetes CA (`cluster.ca`).
    pub kubernetes_ca: CertificateAuthority,
    /// The etcd CA (`cluster.etcd.ca`).
    pub etcd_ca: CertificateAuthority,
    /// The front-proxy CA for API aggregation (`cluster.aggregatorCA`).
    pub aggregator_ca: CertificateAuthority,
    /// The service-account signing key, PEM (`cluster.serviceAccount.key`).
    pub service_account_key_pem: String,
}

impl fmt::Debug for SecretsBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretsBundle")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// A bundle that cannot render a config, naming the field (never its value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleShape {
    /// The bundle was written in a format this capstan does not read.
    #[error(
        "the Talos secrets bundle has format {found}; this capstan reads format {BUNDLE_FORMAT}"
    )]
    Format {
        /// The format found.
        found: u32,
    },
    /// A field does not have the shape Talos requires.
    #[error("the Talos secrets bundle's {field} is not {expected}")]
    Field {
        /// The field, as serialized.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

impl SecretsBundle {
    /// The secret values in this bundle, for a redactor to learn (every field but `format`;
    /// certificates included, since a CA certificate beside its key adds nothing, and a whole
    /// PEM is how a key would leak).
    pub fn secret_values(&self) -> Vec<&str> {
        let mut values = vec![
            self.cluster_id.as_str(),
            self.cluster_secret.as_str(),
            self.bootstrap_token.as_str(),
            self.secretbox_encryption_secret.as_str(),
            self.trustd_token.as_str(),
            self.service_account_key_pem.as_str(),
        ];
        for ca in self.authorities() {
            values.push(ca.1.key_pem.as_str());
        }
        values
    }

    /// The four CAs with their serialized names.
    pub fn authorities(&self) -> [(&'static str, &CertificateAuthority); 4] {
        [
            ("osCa", &self.os_ca),
            ("kubernetesCa", &self.kubernetes_ca),
            ("etcdCa", &self.etcd_ca),
            ("aggregatorCa", &self.aggregator_ca),
        ]
    }

    /// Whether every field has the shape Talos requires (tokens, base64 keys, PEM blocks). It
    /// does not parse the certificates: the daemon made them, and core parses no X.509.
    ///
    /// # Errors
    ///
    /// The first malformed field, by name.
    pub fn check(&self) -> Result<(), BundleShape> {
        if self.format != BUNDLE_FORMAT {
            return Err(BundleShape::Format { found: self.format });
        }
        let tokens = [
            ("bootstrapToken", &self.bootstrap_token),
            ("trustdToken", &self.trustd_token),
        ];
        for (field, token) in tokens {
            if !is_token(token) {
                return Err(BundleShape::Field {
                    field,
                    expected: "a token of the form [a-z0-9]{6}.[a-z0-9]{16}",
                });
            }
        }
        let keys = [
            ("clusterId", &self.cluster_id),
            ("clusterSecret", &self.cluster_secret),
            (
                "secretboxEncryptionSecret",
                &self.secretbox_encryption_secret,
            ),
        ];
        for (field, key) in keys {
            if !is_base64_of_32_bytes(key) {
                return Err(BundleShape::Field {
                    field,
                    expected: "32 bytes in standard base64",
                });
            }
        }
        for (field, ca) in self.authorities() {
            if !is_pem(&ca.certificate_pem, "CERTIFICATE") || !is_pem(&ca.key_pem, "PRIVATE KEY") {
                return Err(BundleShape::Field {
                    field,
                    expected: "a PEM certificate and a PEM private key",
                });
            }
        }
        if !is_pem(&self.service_account_key_pem, "PRIVATE KEY") {
            return Err(BundleShape::Field {
                field: "serviceAccountKeyPem",
                expected: "a PEM private key",
            });
        }
        Ok(())
    }
}

/// A Kubernetes bootstrap token's shape, which Talos also requires of trustd's token.
pub fn is_token(token: &str) -> bool {
    let lower_alnum = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    match token.split_once('.') {
        Some((id, secret)) => {
            id.len() == 6 && secret.len() == 16 && lower_alnum(id) && lower_alnum(secret)
        }
        None => false,
    }
}

fn is_base64_of_32_bytes(text: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .is_ok_and(|bytes| bytes.len() == 32)
}

/// One PEM block whose label ends with `label` (`PRIVATE KEY` matches `EC PRIVATE KEY`).
fn is_pem(text: &str, label: &str) -> bool {
    let text = text.trim();
    let Some(rest) = text.strip_prefix("-----BEGIN ") else {
        return false;
    };
    let Some((begin_label, _)) = rest.split_once("-----") else {
        return false;
    };
    begin_label.ends_with(label) && text.ends_with(&format!("-----END {begin_label}-----"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::talos::fixtures::bundle;

    #[test]
    fn a_well_formed_bundle_passes_its_check() {
        assert_eq!(bundle().check(), Ok(()));
    }

    #[test]
    fn a_malformed_field_is_named_and_its_value_never_shown() {
        let mut bad = bundle();
        bad.trustd_token = "Not-A-Token-secretvalue".into();
        let err = bad.check().expect_err("malformed").to_string();
        assert_eq!(
            err,
            "the Talos secrets bundle's trustdToken is not a token of the form [a-z0-9]{6}.[a-z0-9]{16}"
        );

        let mut bad = bundle();
        bad.secretbox_encryption_secret = "c2hvcnQ=".into();
        assert!(
            bad.check()
                .expect_err("short")
                .to_string()
                .contains("secretboxEncryptionSecret")
        );

        let mut bad = bundle();
        bad.etcd_ca.key_pem = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----".into();
        assert!(
            bad.check()
                .expect_err("not a key")
                .to_string()
                .contains("etcdCa")
        );
    }

    #[test]
    fn a_bundle_of_another_format_is_refused() {
        let mut other = bundle();
        other.format = 2;
        assert_eq!(other.check(), Err(BundleShape::Format { found: 2 }));
    }

    #[test]
    fn debug_shows_no_secret() {
        let shown = format!("{:?} {:?}", bundle(), bundle().os_ca);
        for secret in bundle().secret_values() {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn the_bundle_round_trips_through_json() {
        let text = serde_json::to_string(&bundle()).expect("serializes");
        let back: SecretsBundle = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, bundle());
    }

    #[test]
    fn tokens_have_kubernetes_bootstrap_token_shape() {
        assert!(is_token("abcdef.0123456789abcdef"));
        for bad in [
            "abcdef0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdef.0123456789abcde-",
        ] {
            assert!(!is_token(bad), "{bad}");
        }
    }
}
