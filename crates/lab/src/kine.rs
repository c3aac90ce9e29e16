//! kine, as a simulated K3s server runs it: the cluster state in a real MySQL/MariaDB database,
//! reached with a real MySQL client through the DSN `--datastore-endpoint` gave. Opening does
//! what kine's MySQL driver does (create the database if the user may, then the `kine` table
//! and its indexes, tolerating indexes that exist) and keys are written as kine's log does: one
//! row per revision, `prev_revision` pointing at the row it replaces. Errors read as K3s prints
//! them (go-sql-driver's `Error 1045 (28000): ...`).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Pool};

/// kine's MySQL schema (k3s-io/kine, pkg/drivers/mysql).
const SCHEMA: &str = "create table if not exists kine
    (
        id INTEGER AUTO_INCREMENT,
        name VARCHAR(630),
        created INTEGER,
        deleted INTEGER,
        create_revision INTEGER,
        prev_revision INTEGER,
        lease INTEGER,
        value MEDIUMBLOB,
        old_value MEDIUMBLOB,
        PRIMARY KEY (id)
    )";
const INDEXES: [&str; 3] = [
    "create index kine_name_index on kine (name)",
    "create index kine_name_id_index on kine (name,id)",
    "create unique index kine_name_prev_revision_uindex on kine (name, prev_revision)",
];
/// MySQL's "Duplicate key name": the index exists (kine ignores it).
const ER_DUP_KEYNAME: u16 = 1061;
/// The row kine writes first, holding the compacted revision.
const COMPACT_REV_KEY: &str = "compact_rev_key";
/// kine's default database when the DSN names none.
const DEFAULT_DATABASE: &str = "kubernetes";

/// What failed in the datastore, in K3s's words.
#[derive(Debug, thiserror::Error)]
pub enum KineError {
    /// The endpoint is not a DSN the lab can use (the message never echoes the password).
    #[error("invalid datastore endpoint: {why}")]
    Endpoint {
        /// go-sql-driver's or the lab's reason.
        why: &'static str,
    },
    /// The MySQL server refused a statement or could not be reached. The message is the
    /// driver's error as go-sql-driver prints it (what K3s logs), so the driver error is that
    /// text and not repeated as a source.
    #[error("{}", go_text(driver))]
    Database {
        /// The client's error.
        driver: mysql_async::Error,
    },
}

impl From<mysql_async::Error> for KineError {
    fn from(driver: mysql_async::Error) -> Self {
        KineError::Database { driver }
    }
}

/// The parts of a K3s MySQL datastore endpoint. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Dsn {
    /// User.
    pub user: String,
    password: String,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Database.
    pub database: String,
}

impl std::fmt::Debug for Dsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mysql://{}:***@tcp({}:{})/{}",
            self.user, self.host, self.port, self.database
        )
    }
}

impl Dsn {
    /// Reads `mysql://USER:PASS@tcp(HOST:PORT)/DB` as K3s does (the scheme picks the driver,
    /// the rest is go-sql-driver's DSN).
    ///
    /// # Errors
    /// K3s's words for an endpoint it cannot use (never echoing the password).
    pub fn parse(endpoint: &str) -> Result<Self, KineError> {
        let invalid = |why: &'static str| KineError::Endpoint { why };
        let rest = endpoint
            .strip_prefix("mysql://")
            .ok_or_else(|| invalid("only mysql:// endpoints are simulated by the lab"))?;
        let (credentials, rest) = rest
            .rsplit_once('@')
            .ok_or_else(|| invalid("missing user@"))?;
        let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
        let (address, database) = rest.split_once('/').unwrap_or((rest, ""));
        let address = address
            .strip_prefix("tcp(")
            .and_then(|a| a.strip_suffix(')'))
            .ok_or_else(|| invalid("default addr for network unknown"))?;
        let (host, port) = address.rsplit_once(':').unwrap_or((address, "3306"));
        let port = port.parse().map_err(|_| invalid("invalid port"))?;
        let database = database.split('?').next().unwrap_or_default();
        Ok(Dsn {
            user: user.to_owned(),
            password: password.to_owned(),
            host: host.to_owned(),
            port,
            database: if database.is_empty() {
                DEFAULT_DATABASE.to_owned()
            } else {
                database.to_owned()
            },
        })
    }

    /// The password (the lab refuses a command line that carries it).
    pub fn password(&self) -> &str {
        &self.password
    }

    fn options(&self, database: Option<&str>) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .db_name(database)
            .prefer_socket(false)
    }
}

/// A K3s server's open datastore.
#[derive(Debug, Clone)]
pub struct Kine {
    pool: Pool,
    dsn: Dsn,
}

impl Kine {
    /// Opens the datastore as kine does at K3s start: creates the database (or, lacking the
    /// privilege, connects to it as it is), the `kine` table and its indexes, and the
    /// compaction row.
    ///
    /// # Errors
    /// The driver's error as K3s prints it, e.g. `Error 1045 (28000): Access denied for user
    /// 'k3s'@'127.0.0.1' (using password: YES)`.
    pub async fn open(dsn: &Dsn) -> Result<Self, KineError> {
        create_database(dsn).await?;
        let pool = Pool::new(dsn.options(Some(&dsn.database)));
        let kine = Kine {
            pool,
            dsn: dsn.clone(),
        };
        let mut conn = kine.conn().await?;
        conn.query_drop(SCHEMA).await?;
        for index in INDEXES {
            match conn.query_drop(index).await {
                Err(mysql_async::Error::Server(err)) if err.code == ER_DUP_KEYNAME => {}
                other => other?,
            }
        }
        let compact: Option<i64> = conn
            .exec_first("SELECT id FROM kine WHERE name = ?", (COMPACT_REV_KEY,))
            .await?;
        if compact.is_none() {
            kine.put_with(&mut conn, COMPACT_REV_KEY, b"").await?;
        }
        Ok(kine)
    }

    /// The DSN this datastore was opened with.
    pub fn dsn(&self) -> &Dsn {
        &self.dsn
    }

    async fn conn(&self) -> Result<Conn, KineError> {
        self.pool.get_conn().await.map_err(KineError::from)
    }

    /// Writes `key` (a new revision of it when it exists); returns the row id (the revision).
    ///
    /// # Errors
    /// The driver's error as K3s prints it.
    pub async fn put(&self, key: &str, value: &[u8]) -> Result<u64, KineError> {
        let mut conn = self.conn().await?;
        self.put_with(&mut conn, key, value).await
    }

    async fn put_with(&self, conn: &mut Conn, key: &str, value: &[u8]) -> Result<u64, KineError> {
        let latest: Option<(u64, u64, Vec<u8>)> = conn
            .exec_first(
                "SELECT id, create_revision, value FROM kine WHERE name = ? ORDER BY id DESC LIMIT 1",
                (key,),
            )
            .await
            ?;
        let (created, create_revision, prev_revision, old_value) = match latest {
            Some((id, create_revision, old)) => {
                let first = if create_revision == 0 {
                    id
                } else {
                    create_revision
                };
                (0, first, id, Some(old))
            }
            None => (1, 0, 0, None),
        };
        conn.exec_drop(
            "INSERT INTO kine(name, created, deleted, create_revision, prev_revision, lease, value, old_value) VALUES (?, ?, 0, ?, ?, 0, ?, ?)",
            (key, created, create_revision, prev_revision, value, old_value),
        )
        .await
        ?;
        Ok(conn.last_insert_id().unwrap_or_default())
    }

    /// The distinct keys starting with `prefix`.
    ///
    /// # Errors
    /// The driver's error as K3s prints it.
    pub async fn names(&self, prefix: &str) -> Result<Vec<String>, KineError> {
        let mut conn = self.conn().await?;
        conn.exec(
            "SELECT DISTINCT name FROM kine WHERE name LIKE CONCAT(?, '%') ORDER BY name",
            (prefix,),
        )
        .await
        .map_err(KineError::from)
    }

    /// Whether the datastore answers (what the API server's storage health check asks).
    ///
    /// # Errors
    /// The driver's error as K3s prints it.
    pub async fn ping(&self) -> Result<(), KineError> {
        let mut conn = self.conn().await?;
        conn.query_drop("SELECT 1").await.map_err(KineError::from)
    }
}

/// kine's `createDBIfNotExist`: `create database if not exists` through the DSN; when the
/// database is unknown to a user who may not see it yet, again without a database selected.
async fn create_database(dsn: &Dsn) -> Result<(), KineError> {
    let statement = format!("create database if not exists `{}`", dsn.database);
    match Conn::new(dsn.options(Some(&dsn.database))).await {
        Ok(mut conn) => {
            let result = conn.query_drop(&statement).await.map_err(KineError::from);
            let _ = conn.disconnect().await;
            result
        }
        Err(mysql_async::Error::Server(err)) if err.code == 1049 => {
            let mut conn = Conn::new(dsn.options(None)).await?;
            let result = conn.query_drop(&statement).await.map_err(KineError::from);
            let _ = conn.disconnect().await;
            result
        }
        Err(err) => Err(err.into()),
    }
}

/// An error as go-sql-driver's `MySQLError` prints it (what K3s logs), or the network error.
fn go_text(err: &mysql_async::Error) -> String {
    match err {
        mysql_async::Error::Server(server) => format!(
            "Error {} ({}): {}",
            server.code, server.state, server.message
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dsn_reads_as_k3s_reads_it() {
        let dsn = Dsn::parse("mysql://k3s:pw@tcp(192.168.1.108:3306)/k3s_edge").expect("valid");
        assert_eq!(
            (dsn.user.as_str(), dsn.host.as_str(), dsn.port),
            ("k3s", "192.168.1.108", 3306)
        );
        assert_eq!(dsn.database, "k3s_edge");
        assert!(!format!("{dsn:?}").contains("pw"));
        let bare = Dsn::parse("mysql://k3s:pw@tcp(db)/").expect("valid");
        assert_eq!((bare.port, bare.database.as_str()), (3306, "kubernetes"));
        let refused = Dsn::parse("postgres://k3s:secret-pw@db/k3s").expect_err("not mysql");
        assert_eq!(
            refused.to_string(),
            "invalid datastore endpoint: only mysql:// endpoints are simulated by the lab"
        );
        let refused = Dsn::parse("mysql://k3s:secret-pw@db:3306/k3s").expect_err("no tcp()");
        assert_eq!(
            refused.to_string(),
            "invalid datastore endpoint: default addr for network unknown"
        );
        assert!(!format!("{refused:?}").contains("secret-pw"));
    }
}
