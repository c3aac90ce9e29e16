//! The rules a K3s cluster follows beyond kubeadm's: its version carries K3s's build
//! (`v1.36.2+k3s1`), and its servers share one datastore instead of an etcd quorum, so any
//! number of servers is valid, but more than one needs an external datastore (kine on
//! MySQL/MariaDB) that the fleet provisions or the user gives whole.

use super::diagnostic::{Diagnostic, SourceFile};
use super::types::{ClusterSpec, Datastore, Distribution, Fleet};

/// MySQL limits user names to 32 characters; capstan names the user after the database.
const MAX_DATABASE_NAME_LEN: usize = 32;

/// Rules of `spec.kubernetes` that depend on the distribution, and of `spec.controlPlane.replicas`
/// for K3s (kubeadm's quorum rule lives with the other control-plane rules).
pub fn cluster(out: &mut Vec<Diagnostic>, fleet: &Fleet, spec: &ClusterSpec, file: &SourceFile) {
    let kubernetes = &spec.kubernetes;
    if kubernetes.distribution != Distribution::Talos && spec.talos.is_some() {
        out.push(
            file.error(
                "spec.talos",
                format!(
                    "`talos` is for Talos clusters, but the distribution is {}",
                    kubernetes.distribution.name()
                ),
            )
            .with_hint("set `kubernetes.distribution: talos`, or remove `talos`"),
        );
    }
    super::node_addresses::within(out, spec, file);
    match kubernetes.distribution {
        Distribution::Kubeadm | Distribution::Talos => {
            without_k3s_fields(out, spec, file);
            if kubernetes.distribution == Distribution::Talos {
                super::talos::cluster(out, fleet, spec, file);
            }
        }
        Distribution::K3s => {
            if kubernetes.version.k3s_release.is_none() {
                out.push(
                    file.error(
                        "spec.kubernetes.version",
                        format!("{}: a K3s version names K3s's build", kubernetes.version),
                    )
                    .with_hint(format!(
                        "write the K3s release, e.g. `v{}+k3s1`",
                        kubernetes.version
                    )),
                );
            }
            servers(out, spec, file);
            if let Some(datastore) = &kubernetes.datastore {
                datastore_reference(out, fleet, datastore, file);
            }
        }
    }
}

/// kubeadm and Talos: no K3s build in the version, no datastore (their etcd is stacked).
fn without_k3s_fields(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let version = spec.kubernetes.version;
    let name = spec.kubernetes.distribution.name();
    if version.k3s_release.is_some() {
        out.push(
            file.error(
                "spec.kubernetes.version",
                format!("{version} is a K3s release but the distribution is {name}"),
            )
            .with_hint(format!(
                "set `distribution: k3s`, or drop the `+k3sN` build for {name}"
            )),
        );
    }
    if spec.kubernetes.datastore.is_some() {
        out.push(
            file.error(
                "spec.kubernetes.datastore",
                format!(
                    "{name} keeps its state in the control planes' etcd: a datastore is for K3s"
                ),
            )
            .with_hint("set `distribution: k3s`, or remove `datastore`"),
        );
    }
}

fn servers(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let replicas = spec.control_plane.replicas;
    if replicas > 1 && spec.kubernetes.datastore.is_none() {
        out.push(
            file.error(
                "spec.controlPlane.replicas",
                format!("{replicas} K3s servers need an external datastore: the embedded SQLite serves a single server"),
            )
            .with_hint("add `kubernetes.datastore` (`{server: <name in capstan.yaml datastores>, database: <name>}` or `{endpointFrom: {env: VAR}}`), or use 1 server"),
        );
    }
}

fn datastore_reference(
    out: &mut Vec<Diagnostic>,
    fleet: &Fleet,
    datastore: &Datastore,
    file: &SourceFile,
) {
    let path = "spec.kubernetes.datastore";
    let provisioned = datastore.server.is_some() || datastore.database.is_some();
    if provisioned && datastore.endpoint_from.is_some() {
        out.push(
            file.error(path, "set `server` and `database`, or `endpointFrom`, not both")
                .with_hint("capstan provisions `database` on `server`; `endpointFrom` gives a whole kine DSN instead"),
        );
        return;
    }
    if !provisioned && datastore.endpoint_from.is_none() {
        out.push(
            file.error(path, "no datastore named")
                .with_hint("write `{server: <name in capstan.yaml datastores>, database: <name>}` or `{endpointFrom: {env: VAR}}`"),
        );
        return;
    }
    if let Some(server) = &datastore.server
        && !fleet.datastores.contains_key(server)
    {
        out.push(
            file.error(
                &format!("{path}.server"),
                format!("no datastore server named `{server}` in capstan.yaml"),
            )
            .with_hint(known_servers(fleet)),
        );
    }
    match (&datastore.server, &datastore.database) {
        (Some(_), None) => out.push(
            file.error(path, "`server` needs `database`: the database capstan creates there")
                .with_hint("e.g. `database: k3s_edge`"),
        ),
        (None, Some(_)) => out.push(
            file.error(path, "`database` needs `server`: the server to create it on")
                .with_hint(known_servers(fleet)),
        ),
        (Some(_), Some(database)) if !is_database_name(database) => out.push(
            file.error(&format!("{path}.database"), format!("`{database}` is not a database name capstan creates"))
                .with_hint(format!("use letters, digits and `_`, at most {MAX_DATABASE_NAME_LEN} characters (it names the cluster's user too), e.g. `k3s_edge`")),
        ),
        _ => {}
    }
}

fn known_servers(fleet: &Fleet) -> String {
    let names: Vec<&str> = fleet.datastores.keys().map(String::as_str).collect();
    if names.is_empty() {
        "add one under `datastores:` in capstan.yaml, e.g. `mysqlhost: {url: mysql://db.lab.example:3306, adminUser: root, adminPasswordFrom: {env: MARIADB_ROOT_PASSWORD}}`".to_owned()
    } else {
        format!(
            "known in `datastores:`: {}; or add it there",
            names.join(", ")
        )
    }
}

/// Whether `name` is a database (and user) name capstan creates without quoting surprises.
pub fn is_database_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_DATABASE_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::super::types::{DatastoreServer, DatastoreUrlProblem, SecretSource};
    use super::*;

    fn server(url: &str) -> DatastoreServer {
        DatastoreServer {
            url: url.to_owned(),
            admin_user: "root".to_owned(),
            admin_password_from: SecretSource::Env("PASSWORD".to_owned()),
        }
    }

    #[test]
    fn a_datastore_url_is_host_and_port_with_3306_by_default() {
        assert_eq!(
            server("mysql://db.lab.example").host_port(),
            Ok(("db.lab.example".to_owned(), 3306))
        );
        assert_eq!(
            server("mysql://192.168.1.108:3307").host_port(),
            Ok(("192.168.1.108".to_owned(), 3307))
        );
        assert_eq!(
            server("mysql://[::1]:3306").host_port(),
            Ok(("::1".to_owned(), 3306))
        );
        assert_eq!(
            server("mysql://db:port").host_port(),
            Err(DatastoreUrlProblem::Port {
                port: "port".to_owned(),
                url: "mysql://db:port".to_owned(),
            })
        );
        assert!(matches!(
            server("mysql://:3306").host_port(),
            Err(DatastoreUrlProblem::NoHost { .. })
        ));
        for bad in [
            "postgres://db:5432",
            "mysql://",
            "mysql://db:0",
            "mysql://db:port",
            "mysql://u:p@db:3306",
            "mysql://db:3306/k3s",
        ] {
            assert!(server(bad).host_port().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_password_written_into_a_datastore_url_is_not_repeated_by_the_refusal() {
        for (url, shown) in [
            (
                "mysql://root:hunter2@db:3306/k3s",
                "mysql://***@db:3306/k3s",
            ),
            ("postgres://root:hunter2@db/x", "postgres://***@db/x"),
            ("root:hunter2@db", "***@db"),
        ] {
            let refusal = server(url).host_port().expect_err(url).to_string();
            assert!(refusal.contains(shown), "{refusal}");
            assert!(!refusal.contains("hunter2"), "{refusal}");
        }
    }

    #[test]
    fn database_names_are_plain_identifiers_that_fit_a_user_name() {
        assert!(is_database_name("k3s_edge"));
        for bad in ["", "k3s-edge", "k3s edge", "a`b", &"x".repeat(33)] {
            assert!(!is_database_name(bad), "{bad}");
        }
    }
}
