//! Providers: capstan's I/O with the outside world, one trait per provider in domain verbs
//! (`NodeName`, `VmId`), with the real implementation beside it. The executor is generic over
//! the traits, so tests can run it against the lab or against fakes.

pub mod flux;
pub mod kube;
