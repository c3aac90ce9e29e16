//! Where the operator lets capstan's connection secrets go: `--pin FIELD=VALUE` for each
//! Proxmox connection's `url` and `tlsFingerprint` and each datastore server's `url`.

use std::collections::BTreeMap;

use crate::spec::{DatastoreServer, Fleet, SecretSource};

/// A `--pin` is unusable.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// Not `FIELD=VALUE`, or a field that cannot be pinned.
    #[error(
        "`{text}` is not FIELD=VALUE with FIELD one of proxmox.NAME.url, proxmox.NAME.tlsFingerprint, datastores.NAME.url"
    )]
    Syntax {
        /// What was given.
        text: String,
    },
    /// The same field pinned to two values.
    #[error("{field} is pinned twice, to `{first}` and to `{second}`")]
    Twice {
        /// The field.
        field: String,
        /// One value.
        first: String,
        /// The other.
        second: String,
    },
}

/// What a pinned field holds, to compare values as the server would read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PinKind {
    /// A Proxmox API URL: case, a trailing `/` and `/api2/json` do not matter.
    ProxmoxUrl,
    /// A SHA-256 certificate fingerprint: case and `:` do not matter.
    Fingerprint,
    /// A `mysql://HOST[:PORT]` URL: case and the default port do not matter.
    MysqlUrl,
}

impl PinKind {
    /// The kind of `field`, when it can be pinned.
    fn of(field: &str) -> Option<PinKind> {
        let (section, rest) = field.split_once('.')?;
        let (name, key) = rest.split_once('.')?;
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        match (section, key) {
            _ if !name_ok => None,
            ("proxmox", "url") => Some(PinKind::ProxmoxUrl),
            ("proxmox", "tlsFingerprint") => Some(PinKind::Fingerprint),
            ("datastores", "url") => Some(PinKind::MysqlUrl),
            _ => None,
        }
    }

    /// Whether `a` and `b` name the same thing.
    pub(super) fn same(self, a: &str, b: &str) -> bool {
        self.normalize(a) == self.normalize(b)
    }

    fn normalize(self, value: &str) -> String {
        match self {
            PinKind::ProxmoxUrl => {
                let base = value.trim().trim_end_matches('/');
                let base = base.strip_suffix("/api2/json").unwrap_or(base);
                base.trim_end_matches('/').to_ascii_lowercase()
            }
            PinKind::Fingerprint => value
                .chars()
                .filter(char::is_ascii_hexdigit)
                .collect::<String>()
                .to_ascii_uppercase(),
            PinKind::MysqlUrl => {
                let server = DatastoreServer {
                    url: value.trim().to_owned(),
                    admin_user: String::new(),
                    admin_password_from: SecretSource::Env(String::new()),
                };
                match server.host_port() {
                    Ok((host, port)) => format!("{}:{port}", host.to_ascii_lowercase()),
                    Err(_) => value.trim().to_ascii_lowercase(),
                }
            }
        }
    }
}

/// One `--pin FIELD=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    field: String,
    value: String,
}

impl std::str::FromStr for Pin {
    type Err = PinError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || PinError::Syntax {
            text: text.to_owned(),
        };
        let (field, value) = text.split_once('=').ok_or_else(syntax)?;
        let (field, value) = (field.trim(), value.trim());
        if value.is_empty() || PinKind::of(field).is_none() {
            return Err(syntax());
        }
        Ok(Pin {
            field: field.to_owned(),
            value: value.to_owned(),
        })
    }
}

/// Who set the pins a revision is held to, which decides what a refusal tells to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PinOrigin {
    /// The daemon's `--pin` flags.
    Daemon,
    /// The base revision of a preview (the daemon's pins are not known there).
    Base,
}

/// The pinned fields and their values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    values: BTreeMap<String, String>,
    origin: PinOrigin,
}

impl Default for Pins {
    fn default() -> Self {
        Pins {
            values: BTreeMap::new(),
            origin: PinOrigin::Daemon,
        }
    }
}

impl Pins {
    /// The daemon's `--pin` flags.
    ///
    /// # Errors
    /// [`PinError::Twice`] when one field is pinned to two different values.
    pub fn new(pins: impl IntoIterator<Item = Pin>) -> Result<Self, PinError> {
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        for pin in pins {
            match values.get(&pin.field) {
                Some(first) if *first != pin.value => {
                    return Err(PinError::Twice {
                        field: pin.field,
                        first: first.clone(),
                        second: pin.value,
                    });
                }
                _ => {
                    values.insert(pin.field, pin.value);
                }
            }
        }
        Ok(Pins {
            values,
            origin: PinOrigin::Daemon,
        })
    }

    /// What `fleet` (a preview's base revision) says of every pinnable field.
    pub(super) fn of_base(fleet: Option<&Fleet>) -> Self {
        let mut values = BTreeMap::new();
        for (name, connection) in fleet.iter().flat_map(|f| &f.proxmox) {
            values.insert(format!("proxmox.{name}.url"), connection.url.clone());
            if let Some(fingerprint) = &connection.tls_fingerprint {
                values.insert(
                    format!("proxmox.{name}.tlsFingerprint"),
                    fingerprint.clone(),
                );
            }
        }
        for (name, server) in fleet.iter().flat_map(|f| &f.datastores) {
            values.insert(format!("datastores.{name}.url"), server.url.clone());
        }
        Pins {
            values,
            origin: PinOrigin::Base,
        }
    }

    /// The value pinned for `field`.
    pub(super) fn get(&self, field: &str) -> Option<&str> {
        self.values.get(field).map(String::as_str)
    }

    /// Who set these pins.
    pub(super) fn origin(&self) -> PinOrigin {
        self.origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connection_fields_can_be_pinned() {
        for good in [
            "proxmox.homelab.url=https://pve1:8006",
            "proxmox.homelab.tlsFingerprint=AB:CD",
            "datastores.mariadb.url=mysql://db:3306",
        ] {
            assert!(good.parse::<Pin>().is_ok(), "{good}");
        }
        for bad in [
            "proxmox.homelab.url",
            "proxmox.homelab.url=",
            "proxmox.homelab.tokenId=capstan@pve!r",
            "proxmox.Homelab.url=https://pve1:8006",
            "managementClusters.m.kubeconfigFrom=x",
            "url=https://pve1:8006",
        ] {
            assert!(bad.parse::<Pin>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_field_pinned_twice_to_different_values_is_refused() {
        let pin = |text: &str| text.parse::<Pin>().expect("pin");
        assert!(
            Pins::new([
                pin("proxmox.a.url=https://pve1:8006"),
                pin("proxmox.a.url=https://pve1:8006/")
            ])
            .is_err()
        );
        assert!(
            Pins::new([
                pin("proxmox.a.url=https://pve1:8006"),
                pin("proxmox.a.url=https://pve1:8006")
            ])
            .is_ok()
        );
    }

    #[test]
    fn values_compare_as_the_server_reads_them() {
        assert!(PinKind::ProxmoxUrl.same("https://PVE1:8006/", "https://pve1:8006/api2/json"));
        assert!(!PinKind::ProxmoxUrl.same("https://pve1:8006", "https://pve2:8006"));
        assert!(PinKind::Fingerprint.same("ab:cd:ef", "ABCDEF"));
        assert!(PinKind::MysqlUrl.same("mysql://DB", "mysql://db:3306"));
        assert!(!PinKind::MysqlUrl.same("mysql://db:3307", "mysql://db:3306"));
    }
}
