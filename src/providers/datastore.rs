//! K3s datastores: kine on MySQL/MariaDB. capstan administers a server the fleet declares
//! (`datastores.<name>` in `capstan.yaml`): it checks that the server answers and accepts the
//! admin credentials, creates each cluster's database and a user limited to it (idempotently),
//! and builds the kine DSN the K3s servers are started with. A DSN the user gives whole
//! (`endpointFrom`) is checked the same way, as the user it names.
//!
//! # Guarantees
//! - A refusal carries the server's own error text (`ERROR 1045 (28000): Access denied ...`),
//!   which names the user and host but never a password.
//! - Passwords appear in no `Debug`, log or error: [`AdminAccess`] and [`KineEndpoint`] print
//!   fingerprints instead.
//! - Provisioning twice changes nothing: the database and user are created if absent, and the
//!   user's password and grant are set to the same values again; dropping them (a deleted
//!   cluster) twice changes nothing either. Only a database capstan provisioned is dropped:
//!   one a DSN given whole names is the user's.

use std::fmt;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use crate::spec::{DatastoreServer, MYSQL_DEFAULT_PORT};

/// How long a datastore may take to accept a connection before it counts as not answering.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Talking to a datastore failed.
#[derive(Debug, thiserror::Error)]
pub enum DatastoreError {
    /// Nothing answered (connection refused, timeout, TLS or protocol failure).
    #[error("datastore {address} does not answer: {reason}")]
    Unreachable {
        /// `host:port`.
        address: String,
        /// Why, as the client saw it.
        reason: String,
    },
    /// The server answered with an error: wrong credentials, unknown database, no privilege.
    #[error("datastore {address} refused {who}: {server_error}")]
    Refused {
        /// `host:port`.
        address: String,
        /// Which user, doing what.
        who: String,
        /// The server's error, as the `mariadb` client prints it.
        server_error: String,
    },
    /// The kine DSN given through `endpointFrom` is not of kine's MySQL form.
    #[error(
        "the datastore endpoint is not a kine MySQL DSN (mysql://USER:PASS@tcp(HOST:PORT)/DB): {0}"
    )]
    BadEndpoint(String),
}

impl DatastoreError {
    /// Whether waiting may help (the server is down or unreachable), as opposed to a refusal
    /// that only a change of credentials, grants or spec fixes.
    pub fn is_transient(&self) -> bool {
        matches!(self, DatastoreError::Unreachable { .. })
    }
}

/// The admin credentials of a datastore server. `Debug` hides the password.
#[derive(Clone)]
pub struct AdminAccess {
    host: String,
    port: u16,
    user: String,
    password: String,
}

impl fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminAccess")
            .field("address", &self.address())
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl AdminAccess {
    /// The access `server` describes, with the admin password its `adminPasswordFrom` gave.
    ///
    /// # Errors
    /// When the URL is not `mysql://HOST[:PORT]` (validation refuses such a fleet first).
    pub fn new(server: &DatastoreServer, password: String) -> Result<Self, DatastoreError> {
        crate::redact::remember(&password);
        let (host, port) = server
            .host_port()
            .map_err(|why| DatastoreError::BadEndpoint(why.to_string()))?;
        Ok(AdminAccess {
            host,
            port,
            user: server.admin_user.clone(),
            password,
        })
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// Connects as the admin and asks the server's version: the preflight before any VM of a
    /// cluster on this server is cloned.
    ///
    /// # Errors
    /// [`DatastoreError::Unreachable`] or [`DatastoreError::Refused`] with the server's text.
    pub async fn preflight(&self) -> Result<String, DatastoreError> {
        let who = format!("admin user `{}`", self.user);
        let mut conn = connect(
            &self.host,
            self.port,
            &self.user,
            &self.password,
            None,
            &who,
        )
        .await?;
        let version: Option<String> = conn
            .query_first("SELECT VERSION()")
            .await
            .map_err(|err| self.failure(&who, err))?;
        let _ = conn.disconnect().await;
        Ok(version.unwrap_or_default())
    }

    /// Creates `database` and a user of the same name that may use only it, with `password`;
    /// sets the password and grant again when they exist. Returns the DSN the cluster's K3s
    /// servers connect with.
    ///
    /// `database` must be a plain identifier ([`crate::spec::is_database_name`]) and
    /// `password` one capstan generated (hex): both are written into the statements, since
    /// MySQL takes no placeholders for names and `CREATE USER ... IDENTIFIED BY`.
    ///
    /// # Errors
    /// As [`AdminAccess::preflight`]; also a refused privilege (the admin may not create users).
    pub async fn provision(
        &self,
        database: &str,
        password: &str,
    ) -> Result<KineEndpoint, DatastoreError> {
        if !crate::spec::is_database_name(database) || !is_generated(password) {
            return Err(DatastoreError::BadEndpoint(format!(
                "`{database}` is not a plain database name, or the password is not one capstan generated"
            )));
        }
        let who = format!("admin user `{}` provisioning `{database}`", self.user);
        let mut conn = connect(
            &self.host,
            self.port,
            &self.user,
            &self.password,
            None,
            &who,
        )
        .await?;
        // `%`: the K3s servers connect from their own addresses, which change with every
        // replacement; the grant limits the user to its database instead.
        let statements = [
            format!("CREATE DATABASE IF NOT EXISTS `{database}`"),
            format!("CREATE USER IF NOT EXISTS '{database}'@'%' IDENTIFIED BY '{password}'"),
            format!("ALTER USER '{database}'@'%' IDENTIFIED BY '{password}'"),
            format!("GRANT ALL PRIVILEGES ON `{database}`.* TO '{database}'@'%'"),
        ];
        for statement in &statements {
            conn.query_drop(statement)
                .await
                .map_err(|err| self.failure(&who, err))?;
        }
        let _ = conn.disconnect().await;
        Ok(KineEndpoint {
            host: self.host.clone(),
            port: self.port,
            user: database.to_owned(),
            password: password.to_owned(),
            database: database.to_owned(),
        })
    }

    /// Drops `database` and the user of the same name, which [`AdminAccess::provision`]
    /// made: a deleted cluster's data and credentials go with it, and a new cluster of the
    /// same name (a new K3s token) starts on an empty database (K3s refuses bootstrap data
    /// encrypted with another token). Dropping what is gone succeeds.
    ///
    /// # Errors
    /// As [`AdminAccess::provision`].
    pub async fn drop_database(&self, database: &str) -> Result<(), DatastoreError> {
        if !crate::spec::is_database_name(database) {
            return Err(DatastoreError::BadEndpoint(format!(
                "`{database}` is not a plain database name"
            )));
        }
        let who = format!("admin user `{}` dropping `{database}`", self.user);
        let mut conn = connect(
            &self.host,
            self.port,
            &self.user,
            &self.password,
            None,
            &who,
        )
        .await?;
        let statements = [
            format!("DROP DATABASE IF EXISTS `{database}`"),
            format!("DROP USER IF EXISTS '{database}'@'%'"),
        ];
        for statement in &statements {
            conn.query_drop(statement)
                .await
                .map_err(|err| self.failure(&who, err))?;
        }
        let _ = conn.disconnect().await;
        Ok(())
    }

    fn failure(&self, who: &str, err: mysql_async::Error) -> DatastoreError {
        failure(&self.address(), who, err)
    }
}

/// A kine MySQL DSN: what a K3s server's `--datastore-endpoint` carries. `Debug` and
/// `Display` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct KineEndpoint {
    /// Server host.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// The cluster's user.
    pub user: String,
    password: String,
    /// The cluster's database.
    pub database: String,
}

impl fmt::Debug for KineEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for KineEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mysql://{}:***@tcp({})/{}",
            self.user,
            join_host_port(&self.host, self.port),
            self.database
        )
    }
}

impl KineEndpoint {
    /// Reads kine's MySQL DSN form, `mysql://USER:PASS@tcp(HOST:PORT)/DB` (the `tcp(...)`
    /// part may be a bare `HOST:PORT`; options after `?` are kept out of the check).
    ///
    /// # Errors
    /// [`DatastoreError::BadEndpoint`] saying which part is missing (never echoing the text,
    /// which holds a password).
    pub fn parse(dsn: &str) -> Result<Self, DatastoreError> {
        let bad = |what: &str| DatastoreError::BadEndpoint(what.to_owned());
        let rest = dsn
            .trim()
            .strip_prefix("mysql://")
            .ok_or_else(|| bad("it does not start with mysql://"))?;
        let (credentials, rest) = rest
            .rsplit_once('@')
            .ok_or_else(|| bad("it names no USER:PASS@"))?;
        let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
        let (address, database) = rest.split_once('/').ok_or_else(|| bad("it names no /DB"))?;
        let database = database.split('?').next().unwrap_or_default();
        let address = address
            .strip_prefix("tcp(")
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or(address);
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse().map_err(|_| bad("its port is not a number"))?,
            ),
            None => (address, MYSQL_DEFAULT_PORT),
        };
        if user.is_empty() || host.is_empty() || database.is_empty() {
            return Err(bad("its user, host or database is empty"));
        }
        crate::redact::remember(password);
        Ok(KineEndpoint {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            user: user.to_owned(),
            password: password.to_owned(),
            database: database.to_owned(),
        })
    }

    /// The DSN itself, password included: only for the K3s configuration file of a server.
    pub fn dsn(&self) -> String {
        format!(
            "mysql://{}:{}@tcp({})/{}",
            self.user,
            self.password,
            join_host_port(&self.host, self.port),
            self.database
        )
    }

    /// Connects as the cluster's user to its database: what K3s will do when it starts.
    ///
    /// # Errors
    /// [`DatastoreError::Unreachable`] or [`DatastoreError::Refused`] with the server's text
    /// (access denied, unknown database).
    pub async fn check(&self) -> Result<(), DatastoreError> {
        let who = format!("the cluster's user `{}`", self.user);
        let conn = connect(
            &self.host,
            self.port,
            &self.user,
            &self.password,
            Some(&self.database),
            &who,
        )
        .await?;
        let _ = conn.disconnect().await;
        Ok(())
    }
}

async fn connect(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
    database: Option<&str>,
    who: &str,
) -> Result<Conn, DatastoreError> {
    let address = join_host_port(host, port);
    // prefer_socket(false): on a local server the client would otherwise switch to the unix
    // socket, where another account (root@localhost) answers than the one K3s will use.
    let options = OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .db_name(database)
        .prefer_socket(false);
    match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(err)) => Err(failure(&address, who, err)),
        Err(_) => Err(DatastoreError::Unreachable {
            address,
            reason: format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

fn failure(address: &str, who: &str, err: mysql_async::Error) -> DatastoreError {
    match err {
        mysql_async::Error::Server(server) => DatastoreError::Refused {
            address: address.to_owned(),
            who: who.to_owned(),
            server_error: format!(
                "ERROR {} ({}): {}",
                server.code, server.state, server.message
            ),
        },
        other => DatastoreError::Unreachable {
            address: address.to_owned(),
            reason: other.to_string(),
        },
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A fresh secret: 32 random bytes as 64 hex digits (safe inside quotes and in a YAML file),
/// remembered by the redactor as it is made.
///
/// # Errors
/// When the system has no randomness to give.
pub fn generate_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    crate::redact::remember(&secret);
    Ok(secret)
}

fn is_generated(secret: &str) -> bool {
    secret.len() >= 32 && secret.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kine_dsn_reads_as_kine_writes_it_and_never_prints_its_password() {
        let endpoint = KineEndpoint::parse("mysql://rke2:s3cret@tcp(192.168.1.108:3306)/rke2")
            .expect("the seed's DSN");
        assert_eq!(
            (
                endpoint.host.as_str(),
                endpoint.port,
                endpoint.user.as_str()
            ),
            ("192.168.1.108", 3306, "rke2")
        );
        assert_eq!(endpoint.database, "rke2");
        assert_eq!(
            endpoint.dsn(),
            "mysql://rke2:s3cret@tcp(192.168.1.108:3306)/rke2"
        );
        assert!(!format!("{endpoint} {endpoint:?}").contains("s3cret"));
        for bad in [
            "postgres://u:p@tcp(h:5432)/db",
            "mysql://tcp(h:3306)/db",
            "mysql://u:p@tcp(h:port)/db",
            "mysql://u:p@tcp(h:3306)",
        ] {
            let err = KineEndpoint::parse(bad).expect_err(bad);
            assert!(!err.to_string().contains(":p@"), "{err}");
        }
    }

    #[test]
    fn a_dsn_is_shown_without_anything_derived_from_its_password() {
        // A password the user chose may be short: even a hash of it could be guessed offline.
        let endpoint =
            KineEndpoint::parse("mysql://rke2:hunter2@tcp(192.168.1.108:3306)/rke2").expect("DSN");
        assert_eq!(
            endpoint.to_string(),
            "mysql://rke2:***@tcp(192.168.1.108:3306)/rke2"
        );
        let admin = AdminAccess {
            host: "db".to_owned(),
            port: 3306,
            user: "root".to_owned(),
            password: "hunter2".to_owned(),
        };
        let debug = format!("{admin:?}");
        assert!(
            !debug.contains("sha256") && !debug.contains("hunter2"),
            "{debug}"
        );
    }

    #[test]
    fn generated_secrets_are_64_hex_digits_and_differ() {
        let a = generate_secret().expect("random");
        let b = generate_secret().expect("random");
        assert!(is_generated(&a) && a.len() == 64);
        assert_ne!(a, b);
    }
}
