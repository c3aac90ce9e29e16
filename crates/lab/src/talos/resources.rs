//! COSI's resource API (`cosi.resource.State`) as a Talos node serves it beside
//! `MachineService`: the lab answers `List` of `ExtensionStatuses` in the `runtime` namespace,
//! one resource per extension its image carries, as `talosctl get extensions` reads them.
//! Every other call or type answers as Talos does for what it does not serve.

use capstan_talos_api::cosi::resource::state_server::State;
use capstan_talos_api::cosi::resource::{ListRequest, ListResponse, Metadata, Resource, Spec};
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status};

use super::roles::authorize;

/// The resource type of a system extension's status.
pub const EXTENSION_STATUSES: &str = "ExtensionStatuses.runtime.talos.dev";
/// The namespace Talos keeps it in.
const RUNTIME: &str = "runtime";

/// The resource API of one node.
pub(super) struct ResourceService {
    /// The Talos version it runs (the lab's extensions carry it as theirs).
    pub talos_tag: String,
    /// The system extensions its image carries.
    pub extensions: Vec<String>,
}

#[tonic::async_trait]
impl State for ResourceService {
    async fn list(
        &self,
        request: Request<ListRequest>,
    ) -> Result<Response<BoxStream<ListResponse>>, Status> {
        authorize(&request)?;
        let asked = request.get_ref();
        if asked.r#type != EXTENSION_STATUSES {
            return Err(Status::not_found(format!(
                "resource type {:?} is not registered",
                asked.r#type
            )));
        }
        let found: Vec<Result<ListResponse, Status>> = if asked.namespace == RUNTIME {
            self.extension_statuses().map(Ok).collect()
        } else {
            Vec::new()
        };
        Ok(Response::new(Box::pin(futures_util::stream::iter(found))))
    }
}

impl ResourceService {
    /// One `ExtensionStatus` per extension, numbered as Talos numbers them, its spec in YAML
    /// as Talos marshals it (the lab's extensions carry the image's Talos version).
    fn extension_statuses(&self) -> impl Iterator<Item = ListResponse> + '_ {
        self.extensions
            .iter()
            .enumerate()
            .map(|(index, name)| ListResponse {
                resource: Some(Resource {
                    metadata: Some(Metadata {
                        namespace: RUNTIME.to_owned(),
                        r#type: EXTENSION_STATUSES.to_owned(),
                        id: index.to_string(),
                        version: "1".to_owned(),
                        owner: "runtime.ExtensionStatusController".to_owned(),
                        phase: "running".to_owned(),
                        ..Metadata::default()
                    }),
                    spec: Some(Spec {
                        proto_spec: Vec::new(),
                        yaml_spec: format!(
                            "image: {index:03}.{name}.sqsh\nmetadata:\n    name: {name}\n    version: {}\n    author: Sidero Labs\n    description: {name}, as the lab's image carries it\n",
                            self.talos_tag
                        ),
                    }),
                }),
            })
    }
}
